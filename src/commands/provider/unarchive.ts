import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { rolesApi } from '../../client/index.js'

interface Result { id: string; name: string; status: 'unarchived' }

export default class ProviderUnarchive extends ApiCommand<Result> {
  static override summary = 'Unarchive a provider (its roles stay archived; unarchive them one by one).'
  static override examples = ['<%= config.bin %> provider unarchive claude']
  static override args = { provider: Args.string({ required: true, description: 'Provider name or id.' }) }

  async execute(): Promise<Result> {
    const { args } = await this.parse(ProviderUnarchive)
    const api = rolesApi(this.client)
    const p = await api.resolveProvider(args.provider)
    return { id: p.id, name: p.name, ...(await api.unarchiveProvider(p.id)) }
  }

  protected override render(r: Result): void {
    process.stdout.write(`Provider ${r.name} unarchived.\n`)
  }
}
