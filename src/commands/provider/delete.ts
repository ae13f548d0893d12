import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { rolesApi } from '../../client/index.js'

interface Result { id: string; name: string; status: 'deleted' }

export default class ProviderDelete extends ApiCommand<Result> {
  static override summary = 'Delete a provider that no agent role references (provider_in_use otherwise).'
  static override examples = ['<%= config.bin %> provider delete old-gateway']
  static override args = { provider: Args.string({ required: true, description: 'Provider name or id.' }) }

  async execute(): Promise<Result> {
    const { args } = await this.parse(ProviderDelete)
    const api = rolesApi(this.client)
    const p = await api.resolveProvider(args.provider)
    return { id: p.id, name: p.name, ...(await api.deleteProvider(p.id)) }
  }

  protected override render(r: Result): void {
    process.stdout.write(`Provider ${r.name} deleted.\n`)
  }
}
