import * as Args from '@oclif/core/args'
import { ApiCommand } from '../../cli/api-command.js'
import { packsApi } from '../../client/packs.js'

interface Result { id: string; name: string; status: 'deleted' }

export default class PackDelete extends ApiCommand<Result> {
  static override summary = 'Delete a pack this org owns; refused while a role that is not archived attaches it.'
  static override examples = ['<%= config.bin %> pack delete hello-pack']
  static override args = { pack: Args.string({ required: true, description: 'Pack name or id.' }) }

  async execute(): Promise<Result> {
    const { args } = await this.parse(PackDelete)
    const api = packsApi(this.client)
    const p = await api.resolvePack(args.pack)
    return { id: p.id, name: p.name, ...(await api.deletePack(p.id)) }
  }

  protected override render(r: Result): void {
    process.stdout.write(`Pack ${r.name} deleted.\n`)
  }
}
