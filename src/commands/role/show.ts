import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { packsApi, rolesApi, type AgentRoleRecord } from '../../client/index.js'
import { details, labelPackIds, ROLE_FIELDS } from '../../cli/role-output.js'

export default class RoleShow extends ApiCommand<AgentRoleRecord> {
  static override summary = 'Show one agent role, with its capabilities.'
  static override examples = ['<%= config.bin %> role show coder', '<%= config.bin %> role show role_0193… --json']
  static override args = { role: Args.string({ required: true, description: 'Role name or id.' }) }

  #packNames = new Map<string, string>()

  async execute(): Promise<AgentRoleRecord> {
    const { args } = await this.parse(RoleShow)
    const role = await rolesApi(this.client).resolveRole(args.role)
    // One more call, only for people and only when packs are attached; the ids still show if it fails.
    if (!this.jsonEnabled() && role.pack_ids.length > 0) {
      const packs = await packsApi(this.client).listPacks().catch(() => [])
      this.#packNames = new Map(packs.map((p) => [p.id, p.name]))
    }
    return role
  }

  protected override render(r: AgentRoleRecord): void {
    process.stdout.write(details(labelPackIds(r, this.#packNames), ROLE_FIELDS))
  }
}
