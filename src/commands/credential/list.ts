import { ApiCommand } from '../../cli/api-command.js'
import { credentialTable, type CredentialMeta } from '../../cli/credential-output.js'

export default class CredentialList extends ApiCommand<CredentialMeta[]> {
  static override summary = 'List credentials with their status and owner (metadata only).'
  static override description = 'With auth:write: every credential of the org, org-wide (owner "org") and every member\'s personal ones (owner: the member\'s user id). With auth:write:own only: your own personal credentials.'
  static override examples = ['<%= config.bin %> credential list', '<%= config.bin %> credential list --json']

  async execute(): Promise<CredentialMeta[]> {
    await this.parse(CredentialList)
    return (await this.client.request<{ credentials: CredentialMeta[] }>('GET', '/credentials')).credentials
  }

  protected override render(rows: CredentialMeta[]): void {
    process.stdout.write(credentialTable(rows))
  }
}
