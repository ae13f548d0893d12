import * as Flags from '@oclif/core/flags'
import { ApiCommand } from '../../cli/api-command.js'
import { eventLine } from '../../cli/audit-render.js'
import * as q from '../../cli/flags.js'
import { diag } from '../../cli/output.js'
import { followActivity, parseFilter } from '../../client/index.js'
import { matchesFilters } from '../../contract/index.js'

export default class AuditTail extends ApiCommand<undefined> {
  static override summary = 'Follow the live activity stream, one line per event (NDJSON with --json).'
  static override description = `Follows the org-wide stream, or one workspace's with --workspace. Reconnects by itself and resumes after the last event seen (Last-Event-ID), so nothing is missed or repeated. --filter uses the audit query grammar; the server filters the stream, and the CLI checks each event against the same filters. Ctrl-C stops (exit 0); a refused connection (for example a revoked key) stops with one error line (exit 1).`

  static override examples = [
    '<%= config.bin %> audit tail',
    '<%= config.bin %> audit tail --workspace ws_01J… --filter decision=deny',
    '<%= config.bin %> audit tail --json | jq .event_type',
  ]

  static override flags = {
    filter: q.filter,
    workspace: q.workspace,
    'last-event-id': Flags.string({ helpValue: 'ID', summary: 'Resume after this event id.' }),
    count: Flags.integer({ min: 1, summary: 'Exit after printing this many events.' }),
  }

  async execute(): Promise<undefined> {
    const { flags } = await this.parse(AuditTail)
    const filters = (flags.filter ?? []).map(parseFilter)
    const json = this.jsonEnabled()
    const stop = new AbortController()
    // Ctrl-C and SIGTERM end a tail normally (exit 0), whatever the stream was doing.
    const onSignal = () => stop.abort()
    process.once('SIGINT', onSignal)
    process.once('SIGTERM', onSignal)
    let printed = 0
    let opened = false
    try {
      await followActivity(this.client, {
        workspaceId: flags.workspace,
        filter: flags.filter,
        lastEventId: flags['last-event-id'],
        signal: stop.signal,
        onOpen: () => {
          if (opened) return diag('Reconnected.')
          opened = true
          diag(`Following ${flags.workspace ? `workspace ${flags.workspace}` : 'the organisation'}'s activity (Ctrl-C to stop)`)
        },
        onReconnecting: (last) => diag(`Stream ended; reconnecting${last ? ` after ${last}` : ''}…`),
        onEvent: (event) => {
          if (!matchesFilters(event, filters)) return
          process.stdout.write((json ? JSON.stringify(event) : eventLine(event)) + '\n')
          printed += 1
          if (flags.count !== undefined && printed >= flags.count) stop.abort()
        },
      })
    } finally {
      process.off('SIGINT', onSignal)
      process.off('SIGTERM', onSignal)
    }
    return undefined
  }
}
