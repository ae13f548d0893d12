import { ApiCommand } from '../../cli/api-command.js'
import { table } from '../../cli/output.js'
import type { CredentialMeta } from './create.js'

export default class CredentialList extends ApiCommand<CredentialMeta[]> {
  static override summary = 'List the org credentials (metadata only).'
  static override examples = ['<%= config.bin %> credential list --json']

  async execute(): Promise<CredentialMeta[]> {
    await this.parse(CredentialList)
    return (await this.client.request<{ credentials: CredentialMeta[] }>('GET', '/credentials')).credentials
  }

  protected override render(rows: CredentialMeta[]): void {
    process.stdout.write(table(rows, [
      { header: 'id', get: (c) => c.id },
      { header: 'name', get: (c) => c.name },
      { header: 'provider', get: (c) => c.provider },
      { header: 'kind', get: (c) => c.kind },
      { header: 'status', get: (c) => c.status },
      { header: 'created_at', get: (c) => c.created_at },
    ]))
  }
}
