import { Args } from '@oclif/core'
import { CorralCommand } from '../../../cli/base-command.js'
import { POSTURES } from '../../../contract/index.js'
import { CliError } from '../../../cli/errors.js'
import { openStoreFromFlags, storeFlags } from '../../../cli/store-flags.js'

export interface AdminOrgPostureResult {
  org: { id: string; name: string; posture: string }
}

export default class AdminOrgPosture extends CorralCommand<AdminOrgPostureResult> {
  static override summary = "Set an org's billing posture; writes are refused (403 tenant_inactive) unless it is active."
  static override examples = ['<%= config.bin %> admin org posture org_0193… past_due']
  static override args = {
    org: Args.string({ description: 'Org id (or name).', required: true }),
    posture: Args.string({ description: 'New posture.', required: true, options: [...POSTURES] }),
  }
  static override flags = { ...storeFlags }

  async execute(): Promise<AdminOrgPostureResult> {
    const { args, flags } = await this.parse(AdminOrgPosture)
    const store = await openStoreFromFlags(flags)
    try {
      const org = (await store.orgs.get(args.org)) ?? (await store.orgs.getByName(args.org))
      if (!org) throw new CliError(`no org ${args.org}`, 'not_found')
      const updated = await store.orgs.setPosture(org.id, args.posture as (typeof POSTURES)[number])
      if (!updated) throw new CliError(`no org ${args.org}`, 'not_found')
      return { org: { id: updated.id, name: updated.name, posture: updated.posture } }
    } finally {
      await store.close()
    }
  }

  protected override render(r: AdminOrgPostureResult): void {
    process.stdout.write(`Org ${r.org.name} (${r.org.id}) is now ${r.org.posture}.\n`)
  }
}
