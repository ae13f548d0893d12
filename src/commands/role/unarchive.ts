import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { rolesApi } from '../../client/index.js'

interface Result { id: string; name: string; status: 'unarchived' }

export default class RoleUnarchive extends ApiCommand<Result> {
  static override summary = 'Unarchive an agent role (refused while its provider is archived).'
  static override examples = ['<%= config.bin %> role unarchive coder']
  static override args = { role: Args.string({ required: true, description: 'Role name or id.' }) }

  async execute(): Promise<Result> {
    const { args } = await this.parse(RoleUnarchive)
    const api = rolesApi(this.client)
    const r = await api.resolveRole(args.role)
    return { id: r.id, name: r.name, ...(await api.unarchiveRole(r.id)) }
  }

  protected override render(r: Result): void {
    process.stdout.write(`Agent role ${r.name} unarchived.\n`)
  }
}
