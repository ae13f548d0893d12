import { Flags } from '@oclif/core'
import { ApiCommand } from '../cli/api-command.js'
import { UsageError } from '../cli/errors.js'
import { DEFAULT_PROFILE, configPath, readConfig, writeConfig } from '../cli/profiles.js'
import { CorralClient } from '../client/client.js'
import { ApiError } from '../client/errors.js'

export interface LoginResult {
  profile: string
  api_url: string
  org_id?: string
  config_path: string
}

export default class Login extends ApiCommand<LoginResult> {
  static override summary = 'Check a token against the API and save it as a profile.'
  static override description = `Saves --api-url and --token (or CORRAL_API_URL / CORRAL_TOKEN) under $XDG_CONFIG_HOME/corral/config.json (mode 0600) and makes the profile current. The token is verified first and never printed.`
  static override examples = [
    '<%= config.bin %> login --api-url http://127.0.0.1:7070 --token "$(cat .corral/admin.key)"',
    '<%= config.bin %> login --profile staging --api-url https://corral.staging.example.com --token crl_… --org org_01J…',
  ]

  static override flags = {
    org: Flags.string({ helpValue: 'ORG_ID', summary: 'Org id to record for `org members` (read from a session token when omitted).' }),
  }

  async execute(): Promise<LoginResult> {
    const { flags } = await this.parse(Login)
    const g = flags as { 'api-url'?: string; token?: string; profile?: string }
    if (!g['api-url'] || !g.token) throw new UsageError('login needs --api-url URL and --token TOKEN (or CORRAL_API_URL / CORRAL_TOKEN)')
    const name = g.profile ?? DEFAULT_PROFILE
    // Login talks to exactly the URL and token given: --profile names what to save, not what to read.
    let client: CorralClient
    try {
      client = new CorralClient({ apiUrl: g['api-url'], token: g.token, userAgent: this.config.userAgent })
    } catch (error) {
      throw new UsageError(`${(error as Error).message} (check --api-url)`)
    }
    await verify(client)
    const orgId = flags.org ?? orgFromSessionToken(g.token)
    const config = readConfig()
    config.profiles[name] = { api_url: client.apiUrl, token: g.token, ...(orgId ? { org_id: orgId } : {}) }
    config.current = name
    writeConfig(config)
    return { profile: name, api_url: client.apiUrl, ...(orgId ? { org_id: orgId } : {}), config_path: configPath() }
  }

  protected override render(r: LoginResult): void {
    process.stdout.write(`Logged in to ${r.api_url} as profile "${r.profile}"${r.org_id ? ` (org ${r.org_id})` : ''}; saved to ${r.config_path}.\n`)
  }
}

/**
 * Any authenticated read proves the token; a 403 still means the server knows it (a key whose
 * template lacks audit read). Only 401 and transport failures stop the login.
 */
async function verify(client: CorralClient): Promise<void> {
  try {
    await client.queryAudit({ limit: 1 })
  } catch (error) {
    if (error instanceof ApiError && error.status === 403) return
    throw error
  }
}

/** Session tokens are JWTs carrying `org_id`; reading the claim needs no verification (the server just did that). */
function orgFromSessionToken(token: string): string | undefined {
  const parts = token.split('.')
  if (parts.length !== 3) return undefined
  try {
    const payload = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8')) as { org_id?: unknown }
    return typeof payload.org_id === 'string' ? payload.org_id : undefined
  } catch {
    return undefined
  }
}
