import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { details, ROLE_FIELDS } from '../../client/role-output.js'
import { rolesApi, type AgentRoleRecord } from '../../client/roles.js'

export default class RoleShow extends ApiCommand<AgentRoleRecord> {
  static override summary = 'Show one agent role, with its capabilities.'
  static override examples = ['<%= config.bin %> role show coder', '<%= config.bin %> role show role_0193… --json']
  static override args = { role: Args.string({ required: true, description: 'Role name or id.' }) }

  async execute(): Promise<AgentRoleRecord> {
    const { args } = await this.parse(RoleShow)
    return rolesApi(this.client).resolveRole(args.role)
  }

  protected override render(r: AgentRoleRecord): void {
    process.stdout.write(details(r, ROLE_FIELDS))
  }
}
