import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import { ApiCommand } from '../../../cli/api-command.js'
import * as q from '../../../cli/flags.js'
import { MEMBER_ROLES, type Membership } from '../../../client/index.js'

export default class OrgMembersInvite extends ApiCommand<Membership> {
  static override summary = 'Invite someone to the organisation by email.'
  static override examples = ['<%= config.bin %> org members invite ada@example.com --role admin']
  static override args = { email: Args.string({ required: true, description: 'Email address to invite.' }) }
  static override flags = {
    org: q.org,
    role: Flags.option({ options: MEMBER_ROLES, default: 'member' as const, summary: 'Role granted on acceptance.' })(),
  }

  async execute(): Promise<Membership> {
    const { args, flags } = await this.parse(OrgMembersInvite)
    return this.client.inviteMember(await this.orgId(flags.org), { email: args.email, role: flags.role })
  }

  protected override render(m: Membership): void {
    process.stdout.write(`Invited ${m.email} as ${m.role} (user ${m.user_id}, ${m.status}).\n`)
  }
}
