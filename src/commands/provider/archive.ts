import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { rolesApi } from '../../client/index.js'

interface Result { id: string; name: string; status: 'archived'; cascaded_roles: number }

export default class ProviderArchive extends ApiCommand<Result> {
  static override summary = 'Archive a provider and every agent role that uses it.'
  static override description = 'Refused (workspaces_active) while a workspace of any of those roles still runs: stop them first with `corral role stop-workspaces`. Unarchive restores only the provider.'
  static override examples = ['<%= config.bin %> provider archive claude']
  static override args = { provider: Args.string({ required: true, description: 'Provider name or id.' }) }

  async execute(): Promise<Result> {
    const { args } = await this.parse(ProviderArchive)
    const api = rolesApi(this.client)
    const p = await api.resolveProvider(args.provider)
    return { id: p.id, name: p.name, ...(await api.archiveProvider(p.id)) }
  }

  protected override render(r: Result): void {
    process.stdout.write(`Provider ${r.name} archived; ${r.cascaded_roles} agent role${r.cascaded_roles === 1 ? '' : 's'} archived with it.\n`)
  }
}
