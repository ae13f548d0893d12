import { Flags } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { roleTable } from '../../cli/role-output.js'
import { rolesApi, type AgentRoleRecord } from '../../client/index.js'

export default class RoleList extends ApiCommand<AgentRoleRecord[]> {
  static override summary = 'List the org agent roles (archived ones with --all).'
  static override examples = ['<%= config.bin %> role list', '<%= config.bin %> role list --provider claude --json']
  static override flags = {
    all: Flags.boolean({ summary: 'Include archived roles.' }),
    provider: Flags.string({ summary: 'Only roles of this provider (name or id).' }),
  }

  #providerNames = new Map<string, string>()

  async execute(): Promise<AgentRoleRecord[]> {
    const { flags } = await this.parse(RoleList)
    const api = rolesApi(this.client)
    const providerId = flags.provider ? (await api.resolveProvider(flags.provider)).id : undefined
    const [roles, providers] = await Promise.all([
      api.listRoles({ includeArchived: flags.all, providerId }),
      this.jsonEnabled() ? Promise.resolve([]) : api.listProviders({ includeArchived: true }),
    ])
    this.#providerNames = new Map(providers.map((p) => [p.id, p.name]))
    return roles
  }

  protected override render(rows: AgentRoleRecord[]): void {
    process.stdout.write(roleTable(rows, this.#providerNames))
  }
}
