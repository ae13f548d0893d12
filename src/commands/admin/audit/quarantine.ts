import * as Flags from '@oclif/core/flags'
import { CorralCommand } from '../../../cli/base-command.js'
import { diag, table } from '../../../cli/output.js'
import { openStoreFromFlags, storeFlags } from '../../../cli/store-flags.js'
import type { QuarantinedEvent } from '../../../store/index.js'

export interface AdminAuditQuarantineResult {
  events: QuarantinedEvent[]
}

export default class AdminAuditQuarantine extends CorralCommand<AdminAuditQuarantineResult> {
  static override summary = 'List audit events the writer quarantined instead of storing (invalid, too large, refused by the database).'
  static override description = `Newest first. Each entry has the reason and the event as it was handed to the writer (JSON text). A quarantined event is a bug of its producer or a limit hit (docs/audit.md "Quarantine"); the counters are in GET /healthz.`
  static override examples = ['<%= config.bin %> admin audit quarantine --limit 20', '<%= config.bin %> admin audit quarantine --json']
  static override flags = {
    ...storeFlags,
    limit: Flags.integer({ min: 1, max: 1000, default: 50, summary: 'Entries to show.' }),
  }

  async execute(): Promise<AdminAuditQuarantineResult> {
    const { flags } = await this.parse(AdminAuditQuarantine)
    const store = await openStoreFromFlags(flags)
    try {
      return { events: await store.audit.listQuarantine({ limit: flags.limit }) }
    } finally {
      await store.close()
    }
  }

  protected override render(r: AdminAuditQuarantineResult): void {
    process.stdout.write(
      table(r.events, [
        { header: 'time', get: (e) => e.quarantined_at },
        { header: 'id', get: (e) => e.id },
        { header: 'org', get: (e) => e.org_id },
        { header: 'reason', get: (e) => e.reason.slice(0, 120) },
        { header: 'event', get: (e) => (e.event.length > 80 ? `${e.event.slice(0, 77)}...` : e.event) },
      ]),
    )
    diag(`${r.events.length} quarantined event${r.events.length === 1 ? '' : 's'}`)
  }
}
