import * as Flags from '@oclif/core/flags'
import type * as Interfaces from '@oclif/core/interfaces'
import { CorralClient } from '../client/client.js'
import { CorralCommand } from './base-command.js'
import { UsageError } from './errors.js'
import { readConfig, selectProfile, type Profile } from './profiles.js'

/** The connection flags every API command takes, in the GLOBAL help group. */
export const connectionFlags = {
  'api-url': Flags.string({
    env: 'CORRAL_API_URL',
    helpGroup: 'GLOBAL',
    helpValue: 'URL',
    summary: 'Base URL of the corral API (default: from the profile).',
  }),
  token: Flags.string({
    env: 'CORRAL_TOKEN',
    helpGroup: 'GLOBAL',
    summary: 'API key or session token (default: from the profile).',
  }),
  profile: Flags.string({
    env: 'CORRAL_PROFILE',
    helpGroup: 'GLOBAL',
    helpValue: 'NAME',
    summary: 'Saved profile to use (see `corral login`, `corral profile list`).',
  }),
}

export interface Connection {
  apiUrl: string
  token: string
  profileName?: string
  profile?: Profile
}

/**
 * Base of every command that talks to the /v1 API. The connection resolves per value from the
 * flag, then its environment variable, then the saved profile (`--profile`, else the current one),
 * and only when a command first touches `this.client`, so local commands never read the config.
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

  /** Where and as whom this command talks, resolved lazily (see the class comment). */
  protected get connection(): Connection {
    if (this.#connection) return this.#connection
    const g = this.#globals
    const needsProfile = g.profile !== undefined || g['api-url'] === undefined || g.token === undefined
    const selected = needsProfile ? selectProfile(readConfig(), g.profile) : undefined
    const apiUrl = g['api-url'] ?? selected?.profile.api_url
    const token = g.token ?? selected?.profile.token
    if (!apiUrl) {
      throw new UsageError('no API URL: pass --api-url (or set CORRAL_API_URL), or save a profile with `corral login --api-url URL --token TOKEN`')
    }
    if (!token) {
      throw new UsageError('no token: pass --token (or set CORRAL_TOKEN), or save a profile with `corral login --api-url URL --token TOKEN`')
    }
    this.#connection = { apiUrl, token, profileName: selected?.name, profile: selected?.profile }
    return this.#connection
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
