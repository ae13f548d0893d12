import { Args } from '@oclif/core'
import * as Flags from '@oclif/core/flags'
import type { AuditEvent } from '../../contract/index.js'
import { ApiCommand } from '../../cli/api-command.js'
import { eventLine } from '../../cli/audit-render.js'
import { followActivity } from '../../client/index.js'

export default class WorkspaceLogs extends ApiCommand<AuditEvent[] | undefined> {
  static override summary = "Show a workspace's activity: lifecycle and agent events, oldest first."
  static override description = 'With --follow, keeps printing new events from the live stream (NDJSON with --json) until Ctrl-C.'
  static override examples = ['<%= config.bin %> workspace logs ws_0193…', '<%= config.bin %> workspace logs ws_0193… --follow']
  static override args = { id: Args.string({ required: true, description: 'Workspace id.' }) }
  static override flags = {
    follow: Flags.boolean({ char: 'f', summary: 'Keep following the live activity stream.' }),
    limit: Flags.integer({ min: 1, max: 10000, default: 1000, summary: 'At most this many past events.' }),
  }

  async execute(): Promise<AuditEvent[] | undefined> {
    const { args, flags } = await this.parse(WorkspaceLogs)
    const page = await this.client.queryAudit({ order: 'asc', limit: flags.limit, filter: ['category=activity'] }, { workspaceId: args.id })
    if (!flags.follow) return page.events
    const json = this.jsonEnabled()
    const print = (e: AuditEvent) => process.stdout.write((json ? JSON.stringify(e) : eventLine(e)) + '\n')
    for (const e of page.events) print(e)
    const stop = new AbortController()
    const onSignal = () => stop.abort()
    process.once('SIGINT', onSignal)
    try {
      const last = page.events.at(-1)?.id
      await followActivity(this.client, { workspaceId: args.id, filter: ['category=activity'], ...(last ? { lastEventId: last } : {}), signal: stop.signal, onEvent: print })
    } finally {
      process.off('SIGINT', onSignal)
    }
    return undefined
  }

  protected override render(events: AuditEvent[] | undefined): void {
    if (events) for (const e of events) process.stdout.write(eventLine(e) + '\n')
  }
}
