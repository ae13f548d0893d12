import { Args } from '@oclif/core'
import { CorralCommand } from '../../../cli/base-command.js'
import { CliError } from '../../../cli/errors.js'
import { openStoreFromFlags, storeFlags } from '../../../cli/store-flags.js'

export interface AdminOrgCreateResult {
  org: { id: string; name: string }
  api_key: { id: string; value: string }
}

export default class AdminOrgCreate extends CorralCommand<AdminOrgCreateResult> {
  static override summary = 'Create an org and an owner (full_access) API key for it, directly in the store.'
  static override examples = ['<%= config.bin %> admin org create acme --json']
  static override args = { name: Args.string({ description: 'Org name (unique).', required: true }) }
  static override flags = { ...storeFlags }

  async execute(): Promise<AdminOrgCreateResult> {
    const { args, flags } = await this.parse(AdminOrgCreate)
    const store = await openStoreFromFlags(flags)
    try {
      const [{ createAuditWriter }, { createOwnerKey }] = await Promise.all([import('../../../audit/index.js'), import('../../../server/index.js')])
      const org = await store.orgs.create({ name: args.name })
      if (!org) throw new CliError(`an org named "${args.name}" already exists`, 'conflict')
      const audit = createAuditWriter(store)
      try {
        const { key, value } = await createOwnerKey(store, audit, org.id, `owner key for ${org.name}`)
        return { org: { id: org.id, name: org.name }, api_key: { id: key.id, value } }
      } finally {
        await audit.close()
      }
    } finally {
      await store.close()
    }
  }

  protected override render(r: AdminOrgCreateResult): void {
    process.stdout.write(`Created org ${r.org.name} (${r.org.id}).\nOwner API key ${r.api_key.id} (shown once):\n  ${r.api_key.value}\n`)
  }
}
