import { ApiCommand } from '../../../cli/api-command.js'
import * as q from '../../../cli/flags.js'
import { table } from '../../../cli/output.js'
import type { Membership } from '../../../client/index.js'

export default class OrgMembersList extends ApiCommand<Membership[]> {
  static override summary = 'List the members of an organisation, including pending invitations.'
  static override examples = ['<%= config.bin %> org members list', '<%= config.bin %> org members list --org org_01J… --json']
  static override flags = { org: q.org }

  async execute(): Promise<Membership[]> {
    const { flags } = await this.parse(OrgMembersList)
    return this.client.listMembers(await this.orgId(flags.org))
  }

  protected override render(members: Membership[]): void {
    process.stdout.write(
      table(members, [
        { header: 'user_id', get: (m) => m.user_id },
        { header: 'email', get: (m) => m.email },
        { header: 'role', get: (m) => m.role },
        { header: 'status', get: (m) => m.status },
        { header: 'created_at', get: (m) => m.created_at },
      ]),
    )
  }
}
