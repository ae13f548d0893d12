import * as Flags from '@oclif/core/flags'
import { CorralCommand } from '../../../cli/base-command.js'
import { auditColumns } from '../../../cli/audit-render.js'
import { UsageError } from '../../../cli/errors.js'
import * as q from '../../../cli/flags.js'
import { diag, table } from '../../../cli/output.js'
import { openStoreFromFlags, storeFlags } from '../../../cli/store-flags.js'
import type { AuditPage } from '../../../audit/index.js'

export default class AdminAuditQuery extends CorralCommand<AuditPage> {
  static override summary = 'Query the platform audit scope: rows no org can be named for (e.g. proxy requests without a valid token).'
  static override description = `Reads the store directly (org_id _platform); no org's audit API returns these rows. Same filters, range, order and cursor as \`audit query\`; --org reads one org's log instead (operator access).`
  static override examples = [
    '<%= config.bin %> admin audit query --filter reason=no_token,invalid_token --from 1h',
    '<%= config.bin %> admin audit query --db postgres://corral@db/corral --json',
  ]
  static override flags = {
    ...storeFlags,
    ...q.auditQuery,
    org: Flags.string({ helpValue: 'ORG_ID', summary: 'Read this org\'s log instead of the platform scope.' }),
  }

  async execute(): Promise<AuditPage> {
    const { flags } = await this.parse(AdminAuditQuery)
    const [{ queryAudit }, { CorralError, PLATFORM_ORG }] = await Promise.all([import('../../../audit/index.js'), import('../../../contract/index.js')])
    const store = await openStoreFromFlags(flags)
    try {
      return await queryAudit(store, flags.org ?? PLATFORM_ORG, {
        filter: flags.filter, from: flags.from, to: flags.to, order: flags.order, limit: flags.limit, cursor: flags.cursor,
      })
    } catch (err) {
      if (err instanceof CorralError) throw new UsageError(err.message, err.details)
      throw err
    } finally {
      await store.close()
    }
  }

  protected override render(page: AuditPage): void {
    process.stdout.write(table(page.events, auditColumns))
    if (page.cursor) diag(`More events: --cursor ${page.cursor}`)
  }
}
