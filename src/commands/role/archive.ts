import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { rolesApi } from '../../client/index.js'

interface Result { id: string; name: string; status: 'archived' }

export default class RoleArchive extends ApiCommand<Result> {
  static override summary = 'Archive an agent role: no new tasks or workspaces; running workspaces keep running.'
  static override examples = ['<%= config.bin %> role archive coder']
  static override args = { role: Args.string({ required: true, description: 'Role name or id.' }) }

  async execute(): Promise<Result> {
    const { args } = await this.parse(RoleArchive)
    const api = rolesApi(this.client)
    const r = await api.resolveRole(args.role)
    return { id: r.id, name: r.name, ...(await api.archiveRole(r.id)) }
  }

  protected override render(r: Result): void {
    process.stdout.write(`Agent role ${r.name} archived.\n`)
  }
}
