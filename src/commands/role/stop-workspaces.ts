import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { rolesApi } from '../../client/index.js'

interface Result { id: string; name: string; stopping: number }

export default class RoleStopWorkspaces extends ApiCommand<Result> {
  static override summary = 'Stop every running workspace of an agent role (idempotent).'
  static override examples = ['<%= config.bin %> role stop-workspaces coder']
  static override args = { role: Args.string({ required: true, description: 'Role name or id.' }) }

  async execute(): Promise<Result> {
    const { args } = await this.parse(RoleStopWorkspaces)
    const api = rolesApi(this.client)
    const r = await api.resolveRole(args.role)
    return { id: r.id, name: r.name, ...(await api.stopRoleWorkspaces(r.id)) }
  }

  protected override render(r: Result): void {
    process.stdout.write(`Stopping ${r.stopping} workspace${r.stopping === 1 ? '' : 's'} of agent role ${r.name}.\n`)
  }
}
