import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import { ApiCommand } from '../../cli/api-command.js'
import { packDetails } from '../../cli/pack-output.js'
import { packsApi, type PackRecord } from '../../client/index.js'

export default class PackClone extends ApiCommand<PackRecord> {
  static override summary = 'Copy a visible pack (e.g. a community pack) into this org as a private pack.'
  static override description = 'The copy has visibility org and tier community, and keeps working if the source is deleted.'
  static override examples = ['<%= config.bin %> pack clone hello-pack --name my-hello']
  static override args = { pack: Args.string({ required: true, description: 'Pack name or id.' }) }
  static override flags = { name: Flags.string({ summary: 'Name of the copy (default: the source name).' }) }

  async execute(): Promise<PackRecord> {
    const { args, flags } = await this.parse(PackClone)
    const api = packsApi(this.client)
    const source = await api.resolvePack(args.pack)
    return api.clonePack(source.id, { name: flags.name })
  }

  protected override render(p: PackRecord): void {
    process.stdout.write(`Pack ${p.name} cloned.\n${packDetails(p)}`)
  }
}
