import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import { ApiCommand } from '../../../cli/api-command.js'
import * as q from '../../../cli/flags.js'
import { MEMBER_ROLES, type Membership } from '../../../client/index.js'

export default class OrgMembersUpdate extends ApiCommand<Membership> {
  static override summary = "Change a member's role (the last owner cannot be demoted)."
  static override examples = ['<%= config.bin %> org members update usr_01J… --role member']
  static override args = { user: Args.string({ required: true, description: 'User id of the member (see `org members list`).' }) }
  static override flags = {
    org: q.org,
    role: Flags.option({ options: MEMBER_ROLES, required: true, summary: 'New role.' })(),
  }

  async execute(): Promise<Membership> {
    const { args, flags } = await this.parse(OrgMembersUpdate)
    return this.client.updateMember(await this.orgId(flags.org), args.user, { role: flags.role })
  }

  protected override render(m: Membership): void {
    process.stdout.write(`${m.email} is now ${m.role}.\n`)
  }
}
