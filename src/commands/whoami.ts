import { ApiCommand } from '../cli/api-command.js'
import { recordLines } from '../cli/workspace-output.js'
import type { Me } from '../client/index.js'

export interface WhoamiResult extends Me {
  api_url: string
  /** The saved profile the connection came from, when it came from one. */
  profile?: string
}

export default class Whoami extends ApiCommand<WhoamiResult> {
  static override summary = 'Show who the current token is: server, profile, org, kind, user and permissions.'
  static override description = 'Asks the server (GET /v1/me) with the connection every other command would use (flags, chosen profile, environment, current profile). The token itself is never printed.'
  static override examples = ['<%= config.bin %> whoami', '<%= config.bin %> whoami --profile staging --json']

  async execute(): Promise<WhoamiResult> {
    await this.parse(Whoami)
    const me = await this.client.me()
    const { profileName } = this.connection
    return { api_url: this.client.apiUrl, ...(profileName ? { profile: profileName } : {}), ...me }
  }

  protected override render(r: WhoamiResult): void {
    process.stdout.write(
      recordLines(
        {
          api_url: r.api_url,
          profile: r.profile,
          org: `${r.org.name} (${r.org.id})${r.org.posture && r.org.posture !== 'active' ? ` [${r.org.posture}]` : ''}`,
          kind: r.kind === 'api_key' ? `API key ${r.key_id ?? ''}${r.permission_set ? ` (${r.permission_set})` : ''}`.trim() : 'session',
          user: r.email ? `${r.user_id} <${r.email}>${r.role ? ` (${r.role})` : ''}` : r.user_id,
          permissions: r.permissions.join(', '),
        },
        ['api_url', 'profile', 'org', 'kind', 'user', 'permissions'],
      ),
    )
  }
}
