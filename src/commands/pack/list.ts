import * as Flags from '@oclif/core/flags'
import { ApiCommand } from '../../cli/api-command.js'
import { packTable } from '../../cli/pack-output.js'
import { packsApi, type PackRecord } from '../../client/index.js'

export default class PackList extends ApiCommand<PackRecord[]> {
  static override summary = 'List the packs this org can use: its own and community packs.'
  static override examples = ['<%= config.bin %> pack list', '<%= config.bin %> pack list --owned --json']
  static override flags = { owned: Flags.boolean({ summary: 'Only the packs this org owns.' }) }

  async execute(): Promise<PackRecord[]> {
    const { flags } = await this.parse(PackList)
    const packs = await packsApi(this.client).listPacks({ owned: flags.owned })
    // Filtered here too, so --owned means the same whatever the server does with the parameter.
    return flags.owned ? packs.filter((p) => p.owned) : packs
  }

  protected override render(rows: PackRecord[]): void {
    process.stdout.write(packTable(rows))
  }
}
