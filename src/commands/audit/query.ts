import * as Flags from '@oclif/core/flags'
import { ApiCommand } from '../../cli/api-command.js'
import { auditColumns } from '../../cli/audit-render.js'
import * as q from '../../cli/flags.js'
import { diag, table } from '../../cli/output.js'
import type { AuditPage } from '../../client/index.js'

export default class AuditQuery extends ApiCommand<AuditPage | undefined> {
  static override summary = 'Query the audit log (org-wide, or one workspace with --workspace).'
  static override description = `Prints one page (newest first by default). The cursor of a full page is printed on stderr; pass it back with --cursor, or use --all to follow every cursor.
With --json: one page prints {"events": [...], "cursor": "..."}; with --all, events stream as NDJSON (one JSON event per line).`

  static override examples = [
    '<%= config.bin %> audit query --filter decision=deny --from 1h',
    '<%= config.bin %> audit query --workspace ws_01J… --filter event_type=policy_decision --order asc --all --json',
  ]

  static override flags = {
    ...q.auditQuery,
    workspace: q.workspace,
    all: Flags.boolean({ summary: 'Follow cursors to the last page (streams; NDJSON with --json).' }),
  }

  async execute(): Promise<AuditPage | undefined> {
    const { flags } = await this.parse(AuditQuery)
    const query = { filter: flags.filter, from: flags.from, to: flags.to, order: flags.order, limit: flags.limit, cursor: flags.cursor }
    const scope = { workspaceId: flags.workspace }
    if (!flags.all) return this.client.queryAudit(query, scope)

    // --all streams page by page so memory stays flat however long the log is.
    let count = 0
    let first = true
    for await (const page of this.client.auditPages(query, scope)) {
      count += page.events.length
      if (this.jsonEnabled()) {
        for (const event of page.events) process.stdout.write(JSON.stringify(event) + '\n')
      } else {
        const text = table(page.events, auditColumns)
        // The header only once: later pages continue the same table.
        process.stdout.write(first ? text : text.slice(text.indexOf('\n') + 1))
      }
      first = false
    }
    diag(`${count} event${count === 1 ? '' : 's'}`)
    return undefined
  }

  protected override render(page: AuditPage | undefined): void {
    if (!page) return
    process.stdout.write(table(page.events, auditColumns))
    if (page.cursor) diag(`More events: --cursor ${page.cursor}`)
  }
}
