import * as Args from '@oclif/core/args'
import { ApiCommand } from '../../cli/api-command.js'
import { packDetails } from '../../cli/pack-output.js'
import { packsApi, type PackRecord } from '../../client/index.js'

export default class PackShow extends ApiCommand<PackRecord> {
  static override summary = 'Show one pack, with the capabilities fragment it ships.'
  static override description = 'A pack\'s capabilities are shown for the role author to copy what they accept; attaching a pack never adds them to a role\'s policy.'
  static override examples = ['<%= config.bin %> pack show hello-pack', '<%= config.bin %> pack show pack_0193… --json']
  static override args = { pack: Args.string({ required: true, description: 'Pack name or id.' }) }

  async execute(): Promise<PackRecord> {
    const { args } = await this.parse(PackShow)
    return packsApi(this.client).resolvePack(args.pack)
  }

  protected override render(p: PackRecord): void {
    process.stdout.write(packDetails(p))
  }
}
