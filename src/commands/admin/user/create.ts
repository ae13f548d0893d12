import { Flags } from '@oclif/core'
import { CorralCommand } from '../../../cli/base-command.js'
import { MEMBERSHIP_ROLES } from '../../../contract/index.js'
import { CliError } from '../../../cli/errors.js'
import { openStoreFromFlags, storeFlags } from '../../../cli/store-flags.js'

const ROLES = MEMBERSHIP_ROLES

export interface AdminUserCreateResult {
  user: { id: string; email: string; role: string }
  token: string
}

export default class AdminUserCreate extends CorralCommand<AdminUserCreateResult> {
  static override summary = 'Create a user with an active membership and print a session token for them.'
  static override description = 'An existing user (same email) is reused and given the role. The token is a built-in identity-provider session JWT (12 h).'
  static override examples = ['<%= config.bin %> admin user create --org org_0193… --email ana@example.com --role member --json']
  static override flags = {
    ...storeFlags,
    org: Flags.string({ summary: 'Org id (or name).', required: true }),
    email: Flags.string({ summary: "The user's email.", required: true }),
    role: Flags.string({ summary: 'Membership role.', required: true, options: [...ROLES] }),
  }

  async execute(): Promise<AdminUserCreateResult> {
    const { flags } = await this.parse(AdminUserCreate)
    if (!/^[^\s@]+@[^\s@]+$/.test(flags.email)) throw new CliError(`"${flags.email}" is not an email address`, 'validation_error')
    const role = flags.role as (typeof ROLES)[number]
    const store = await openStoreFromFlags(flags)
    try {
      const { BuiltinIdentityProvider } = await import('../../../server/index.js')
      const org = (await store.orgs.get(flags.org)) ?? (await store.orgs.getByName(flags.org))
      if (!org) throw new CliError(`no org ${flags.org}`, 'not_found')
      const user = await store.users.create({ email: flags.email })
      const invited = await store.memberships.invite(org.id, { user_id: user.id, email: user.email, role, status: 'active' })
      if (!invited) {
        const existing = await store.memberships.get(org.id, user.id)
        if (existing && existing.role !== role) {
          const change = await store.memberships.updateRoleUnlessLastOwner(org.id, user.id, role)
          if (!change.ok) throw new CliError(change.reason === 'last_owner' ? 'that would leave the org without an owner' : 'membership vanished', change.reason)
        }
        if (existing?.status === 'pending') await store.memberships.accept(existing.invitation_id)
      }
      const identity = await BuiltinIdentityProvider.open(store.settings)
      const token = await identity.issue({ userId: user.id, orgId: org.id })
      return { user: { id: user.id, email: user.email, role }, token }
    } finally {
      await store.close()
    }
  }

  protected override render(r: AdminUserCreateResult): void {
    process.stdout.write(`User ${r.user.email} (${r.user.id}) is ${r.user.role}.\nSession token:\n  ${r.token}\n`)
  }
}
