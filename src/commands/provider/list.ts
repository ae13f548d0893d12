import { Flags } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { providerTable } from '../../cli/role-output.js'
import { rolesApi, type ProviderRecord } from '../../client/index.js'

export default class ProviderList extends ApiCommand<ProviderRecord[]> {
  static override summary = 'List the org providers (archived ones with --all).'
  static override examples = ['<%= config.bin %> provider list', '<%= config.bin %> provider list --all --json']
  static override flags = { all: Flags.boolean({ summary: 'Include archived providers.' }) }

  async execute(): Promise<ProviderRecord[]> {
    const { flags } = await this.parse(ProviderList)
    return rolesApi(this.client).listProviders({ includeArchived: flags.all })
  }

  protected override render(rows: ProviderRecord[]): void {
    process.stdout.write(providerTable(rows))
  }
}
