import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { rolesApi } from '../../client/index.js'

interface Result { id: string; name: string; status: 'deleted' }

export default class RoleDelete extends ApiCommand<Result> {
  static override summary = 'Delete an agent role that no workspace references (role_in_use otherwise; archive it instead).'
  static override examples = ['<%= config.bin %> role delete coder']
  static override args = { role: Args.string({ required: true, description: 'Role name or id.' }) }

  async execute(): Promise<Result> {
    const { args } = await this.parse(RoleDelete)
    const api = rolesApi(this.client)
    const r = await api.resolveRole(args.role)
    return { id: r.id, name: r.name, ...(await api.deleteRole(r.id)) }
  }

  protected override render(r: Result): void {
    process.stdout.write(`Agent role ${r.name} deleted.\n`)
  }
}
