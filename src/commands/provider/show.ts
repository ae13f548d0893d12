import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { details, PROVIDER_FIELDS } from '../../cli/role-output.js'
import { rolesApi, type ProviderRecord } from '../../client/index.js'

export default class ProviderShow extends ApiCommand<ProviderRecord> {
  static override summary = 'Show one provider.'
  static override examples = ['<%= config.bin %> provider show claude', '<%= config.bin %> provider show prov_0193… --json']
  static override args = { provider: Args.string({ required: true, description: 'Provider name or id.' }) }

  async execute(): Promise<ProviderRecord> {
    const { args } = await this.parse(ProviderShow)
    return rolesApi(this.client).resolveProvider(args.provider)
  }

  protected override render(p: ProviderRecord): void {
    process.stdout.write(details(p, PROVIDER_FIELDS))
  }
}
