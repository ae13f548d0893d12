import * as Flags from '@oclif/core/flags'
import type * as Interfaces from '@oclif/core/interfaces'
import { CorralClient } from '../client/index.js'
import { CorralCommand } from './base-command.js'
import { type Connection, resolveConnection } from './connection.js'
import { UsageError } from './errors.js'
import { readConfig } from './profiles.js'

/**
 * The connection flags every API command takes, in the GLOBAL help group. Their environment
 * variables are resolved by ./connection.ts rather than by oclif, because a chosen profile must
 * outrank them (see there).
 */
export const connectionFlags = {
  'api-url': Flags.string({
    helpGroup: 'GLOBAL',
    helpValue: 'URL',
    summary: 'Base URL of the corral API [env: CORRAL_API_URL] (default: from the profile).',
  }),
  token: Flags.string({
    helpGroup: 'GLOBAL',
    summary: 'API key or session token [env: CORRAL_TOKEN] (default: from the profile).',
  }),
  profile: Flags.string({
    helpGroup: 'GLOBAL',
    helpValue: 'NAME',
    summary: 'Saved profile to use [env: CORRAL_PROFILE] (see `corral login`, `corral profile list`).',
  }),
}

/**
 * Base of every command that talks to the /v1 API. The connection is resolved by
 * `resolveConnection` (flag, chosen profile, environment, current profile) only when a command
 * first touches `this.client`, so commands that fail on their own flags never read the config.
 */
export abstract class ApiCommand<T> extends CorralCommand<T> {
  static override baseFlags = { ...connectionFlags }

  #globals: { 'api-url'?: string; token?: string; profile?: string } = {}
  #connection?: Connection
  #client?: CorralClient

  protected override async parse<F extends Interfaces.OutputFlags<any>, B extends Interfaces.OutputFlags<any>, A extends Interfaces.OutputArgs<any>>(
    options?: Interfaces.Input<F, B, A>,
    argv?: string[],
  ): Promise<Interfaces.ParserOutput<F, B, A>> {
    const parsed = await super.parse(options, argv)
    const flags = parsed.flags as { 'api-url'?: string; token?: string; profile?: string }
    this.#globals = { 'api-url': flags['api-url'], token: flags.token, profile: flags.profile }
    return parsed
  }

  /** Where and as whom this command talks, resolved lazily (see ./connection.ts). */
  protected get connection(): Connection {
    this.#connection ??= resolveConnection(
      { apiUrl: this.#globals['api-url'], token: this.#globals.token, profile: this.#globals.profile },
      process.env,
      () => readConfig(),
    )
    return this.#connection
  }

  /**
   * The API URL when a server is configured (flags, chosen profile, environment, current profile),
   * else undefined — for commands that also work without one (`ca export`, `admin proxy-token`). A
   * server or profile named by a flag that does not resolve is still an error.
   */
  protected configuredApiUrl(): string | undefined {
    try {
      return this.connection.apiUrl
    } catch (error) {
      if (this.#globals['api-url'] || this.#globals.token || this.#globals.profile) throw error
      return undefined
    }
  }

  protected get client(): CorralClient {
    if (this.#client) return this.#client
    const { apiUrl, token } = this.connection
    try {
      this.#client = new CorralClient({ apiUrl, token, userAgent: this.config.userAgent })
    } catch (error) {
      throw new UsageError(`${(error as Error).message} (check --api-url)`)
    }
    return this.#client
  }

  /**
   * The org id to act on: the flag, else the org saved with the profile when the profile's token
   * is the one in use, else the credential's own org as the server reports it (GET /v1/me).
   */
  protected async orgId(flag: string | undefined): Promise<string> {
    if (flag) return flag
    const { profile, token } = this.connection
    if (profile?.org_id && profile.token === token) return profile.org_id
    return (await this.client.me()).org.id
  }
}
