import * as Args from '@oclif/core/args'
import { ApiCommand } from '../../../cli/api-command.js'
import * as q from '../../../cli/flags.js'

export interface RemoveResult {
  org_id: string
  user_id: string
  status: 'removed'
}

export default class OrgMembersRemove extends ApiCommand<RemoveResult> {
  static override summary = 'Remove a member or withdraw a pending invitation (the last owner cannot be removed).'
  static override examples = ['<%= config.bin %> org members remove usr_01J…']
  static override args = { user: Args.string({ required: true, description: 'User id of the member (see `org members list`).' }) }
  static override flags = { org: q.org }

  async execute(): Promise<RemoveResult> {
    const { args, flags } = await this.parse(OrgMembersRemove)
    const orgId = await this.orgId(flags.org)
    await this.client.removeMember(orgId, args.user)
    return { org_id: orgId, user_id: args.user, status: 'removed' }
  }

  protected override render(r: RemoveResult): void {
    process.stdout.write(`Removed ${r.user_id} from ${r.org_id}.\n`)
  }
}
