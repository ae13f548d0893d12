import * as Flags from '@oclif/core/flags'
import { ApiCommand } from '../cli/api-command.js'
import { ENV } from '../cli/connection.js'
import { UsageError } from '../cli/errors.js'
import { DEFAULT_PROFILE, configPath, readConfig, writeConfig } from '../cli/profiles.js'
import { CorralClient } from '../client/index.js'

export interface LoginResult {
  profile: string
  api_url: string
  org_id: string
  org_name?: string
  kind: 'api_key' | 'session'
  user_id: string
  config_path: string
}

export default class Login extends ApiCommand<LoginResult> {
  static override summary = 'Check a token against the API and save it as a profile.'
  static override description = `Asks the server who the token is (GET /v1/me), then saves the URL, the token and the token's org under $XDG_CONFIG_HOME/corral/config.json (mode 0600) and makes the profile current. The token is never printed. --profile names the profile to save (default "default").`
  static override examples = [
    '<%= config.bin %> login --api-url http://127.0.0.1:7070 --token "$(cat .corral/admin.key)"',
    '<%= config.bin %> login --profile staging --api-url https://corral.staging.example.com --token crl_…',
  ]

  static override flags = {
    org: Flags.string({ helpValue: 'ORG_ID', summary: 'Org id to record instead of the one the server reports.' }),
  }

  async execute(): Promise<LoginResult> {
    const { flags } = await this.parse(Login)
    const g = flags as { 'api-url'?: string; token?: string; profile?: string }
    const apiUrl = g['api-url'] || process.env[ENV.apiUrl]
    const token = g.token || process.env[ENV.token]
    if (!apiUrl || !token) throw new UsageError('login needs --api-url URL and --token TOKEN (or CORRAL_API_URL / CORRAL_TOKEN)')
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
    config.current = name
    writeConfig(config)
    return { profile: name, api_url: client.apiUrl, org_id: orgId, org_name: me.org.name, kind: me.kind, user_id: me.user_id, config_path: configPath() }
  }

  protected override render(r: LoginResult): void {
    const who = r.kind === 'api_key' ? 'an API key' : `user ${r.user_id}`
    process.stdout.write(`Logged in to ${r.api_url} (org ${r.org_name ?? r.org_id}, ${who}) as profile "${r.profile}"; saved to ${r.config_path}.\n`)
  }
}
