import * as Flags from '@oclif/core/flags'
import { readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { ApiCommand } from '../cli/api-command.js'
import { ENV } from '../cli/connection.js'
import { UsageError } from '../cli/errors.js'
import { diag } from '../cli/output.js'
import { DEFAULT_PROFILE, configPath, readConfig, writeConfig } from '../cli/profiles.js'
import { CorralClient } from '../client/index.js'
import type { CredentialType } from '../contract/index.js'

export interface LoginResult {
  profile: string
  api_url: string
  org_id: string
  org_name?: string
  kind: CredentialType
  user_id: string
  config_path: string
  /** The profile that was current before, when login switched away from another one. */
  previous_current?: string
  /** Where the token came from when no --token was given: `<data-dir>/admin.key`. */
  token_source?: string
}

/** The address `corral serve` listens on by default (its --host and --port defaults). */
export const DEFAULT_API_URL = 'http://127.0.0.1:7070'

export default class Login extends ApiCommand<LoginResult> {
  static override summary = 'Check a token against the API and save it as a profile.'
  static override description = `Asks the server who the token is (GET /v1/me), then saves the URL, the token and the token's org under $XDG_CONFIG_HOME/corral/config.json (mode 0600). The token is never printed. --profile names the profile to save (default "default").

Without --token (and no CORRAL_TOKEN), on the machine where \`corral serve\` runs, the owner key that serve wrote to <data-dir>/admin.key is used (--data-dir, CORRAL_DATA_DIR, default ./.corral), and the command says so; the URL then defaults to ${'$'}{DEFAULT_API_URL}.

The saved profile becomes the current one; when that switches away from another profile, the command says so and how to switch back (\`corral profile use NAME\`). Other commands' --profile only picks the profile for that one command and never changes the current one.`
  static override examples = [
    '<%= config.bin %> login --api-url http://127.0.0.1:7070 --token "$(cat .corral/admin.key)"',
    '<%= config.bin %> login --profile staging --api-url https://corral.staging.example.com --token crl_…',
    '<%= config.bin %> login    # on the serve machine: picks up ./.corral/admin.key',
  ]

  static override flags = {
    org: Flags.string({ helpValue: 'ORG_ID', summary: 'Org id to record instead of the one the server reports.' }),
    'data-dir': Flags.string({ helpValue: 'DIR', env: 'CORRAL_DATA_DIR', summary: "Without --token: read serve's owner key from DIR/admin.key (default ./.corral)." }),
  }

  async execute(): Promise<LoginResult> {
    const { flags } = await this.parse(Login)
    const g = flags as { 'api-url'?: string; token?: string; profile?: string }
    let apiUrl = g['api-url'] || process.env[ENV.apiUrl]
    let token = g.token || process.env[ENV.token]
    let tokenSource: string | undefined
    if (!token) {
      const found = readAdminKey(flags['data-dir'] ?? './.corral')
      if (!found) {
        throw new UsageError(`login needs --token TOKEN (or CORRAL_TOKEN); no ${join(resolve(flags['data-dir'] ?? './.corral'), 'admin.key')} here to pick up (on the serve machine, pass --data-dir)`)
      }
      token = found.token
      tokenSource = found.path
      apiUrl ||= DEFAULT_API_URL
      diag(`No --token given: using the owner key serve wrote to ${found.path}, against ${apiUrl}.`)
    }
    if (!apiUrl) throw new UsageError('login needs --api-url URL (or CORRAL_API_URL) with --token')
    const name = g.profile || process.env[ENV.profile] || DEFAULT_PROFILE
    // Login talks to exactly the URL and token given: --profile names what to save, not what to read.
    let client: CorralClient
    try {
      client = new CorralClient({ apiUrl, token, userAgent: this.config.userAgent })
    } catch (error) {
      throw new UsageError(`${(error as Error).message} (check --api-url)`)
    }
    const me = await client.me() // 401 here means the token is wrong: nothing is saved
    const orgId = flags.org ?? me.org.id
    const config = readConfig()
    config.profiles[name] = { api_url: client.apiUrl, token, org_id: orgId }
    const previous = config.current && config.current !== name && config.profiles[config.current] ? config.current : undefined
    config.current = name
    writeConfig(config)
    // Switching the current profile is never silent.
    if (previous) diag(`Profile "${name}" is now the current profile (was "${previous}"; switch back with \`corral profile use ${previous}\`).`)
    return {
      profile: name, api_url: client.apiUrl, org_id: orgId, org_name: me.org.name, kind: me.kind, user_id: me.user_id, config_path: configPath(),
      ...(previous ? { previous_current: previous } : {}), ...(tokenSource ? { token_source: tokenSource } : {}),
    }
  }

  protected override render(r: LoginResult): void {
    const who = r.kind === 'api_key' ? 'an API key' : `user ${r.user_id}`
    process.stdout.write(`Logged in to ${r.api_url} (org ${r.org_name ?? r.org_id}, ${who}) as profile "${r.profile}"; saved to ${r.config_path}.\n`)
  }
}

/** serve's owner key, when this machine's data dir has one (serve writes it 0600 on first start). */
function readAdminKey(dataDir: string): { token: string; path: string } | undefined {
  const path = join(resolve(dataDir), 'admin.key')
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined
    throw new UsageError(`cannot read ${path}: ${(error as Error).message}`)
  }
  const token = text.trim()
  if (!token) throw new UsageError(`${path} is empty; pass --token`)
  return { token, path }
}
