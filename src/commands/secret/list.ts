import { ApiCommand } from '../../cli/api-command.js'
import { table } from '../../cli/output.js'
import type { SecretMeta } from './set.js'

export default class SecretList extends ApiCommand<SecretMeta[]> {
  static override summary = 'List the org secrets (names and timestamps; values are never shown).'
  static override examples = ['<%= config.bin %> secret list --json']

  async execute(): Promise<SecretMeta[]> {
    await this.parse(SecretList)
    return (await this.client.request<{ secrets: SecretMeta[] }>('GET', '/secrets')).secrets
  }

  protected override render(rows: SecretMeta[]): void {
    process.stdout.write(table(rows, [
      { header: 'name', get: (s) => s.name },
      { header: 'created_at', get: (s) => s.created_at },
      { header: 'updated_at', get: (s) => s.updated_at },
    ]))
  }
}
