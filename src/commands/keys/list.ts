import { ApiCommand } from '../../cli/api-command.js'
import { table } from '../../cli/output.js'
import type { ApiKey } from '../../client/index.js'

export default class KeysList extends ApiCommand<ApiKey[]> {
  static override summary = 'List the API keys of the organisation (secrets are never shown).'
  static override examples = ['<%= config.bin %> keys list', '<%= config.bin %> keys list --json']

  async execute(): Promise<ApiKey[]> {
    await this.parse(KeysList)
    return this.client.listApiKeys()
  }

  protected override render(keys: ApiKey[]): void {
    process.stdout.write(
      table(keys, [
        { header: 'id', get: (k) => k.id },
        { header: 'label', get: (k) => k.label },
        { header: 'prefix', get: (k) => k.prefix },
        { header: 'permission_set', get: (k) => k.permission_set },
        { header: 'created_at', get: (k) => k.created_at },
        { header: 'last_used_at', get: (k) => k.last_used_at ?? 'never' },
      ]),
    )
  }
}
