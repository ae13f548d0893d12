import { Args } from '@oclif/core'
import * as Flags from '@oclif/core/flags'
import type { AuditEvent } from '../../contract/index.js'
import { ApiCommand } from '../../cli/api-command.js'
import { eventLine } from '../../cli/audit-render.js'
import { agentLogs, followActivity, followAgentLogs, type AgentLogChunk, type CorralClient } from '../../client/index.js'

type Logs = AuditEvent[] | AgentLogChunk[]

/** Every stored chunk of the agent's output (the server keeps at most a few MiB per workspace). */
async function allAgentLogs(client: CorralClient, id: string): Promise<{ chunks: AgentLogChunk[]; next: number }> {
  const chunks: AgentLogChunk[] = []
  let next = 0
  // Bounded: retention caps what the server holds, and each page is at least one chunk.
  for (let i = 0; i < 1000; i++) {
    const page = await agentLogs(client, id, { after: next })
    if (page.chunks.length === 0) break
    chunks.push(...page.chunks)
    next = page.next
  }
  return { chunks, next }
}

export default class WorkspaceLogs extends ApiCommand<Logs | undefined> {
  static override summary = "Show the agent's own stdout/stderr, or with --activity the workspace's activity events."
  static override description = [
    'By default: what the agent process printed (stdout and stderr, combined), as the server stored it (the newest 4 MiB per workspace; capability tokens redacted). With --activity: the activity events (lifecycle and agent events), oldest first.',
    'With --follow, keeps printing new output or events from the live stream (NDJSON with --json) until Ctrl-C.',
  ].join('\n\n')
  static override examples = [
    '<%= config.bin %> workspace logs ws_0193… -f',
    '<%= config.bin %> workspace logs ws_0193… --activity',
    '<%= config.bin %> workspace logs ws_0193… --activity --follow',
  ]
  static override args = { id: Args.string({ required: true, description: 'Workspace id.' }) }
  static override flags = {
    agent: Flags.boolean({ summary: "The agent's own output (stdout and stderr): the default, kept for scripts that name it.", exclusive: ['activity'] }),
    activity: Flags.boolean({ summary: "The workspace's activity events (lifecycle and agent events) instead of the agent's output." }),
    follow: Flags.boolean({ char: 'f', summary: 'Keep following the live stream.' }),
    limit: Flags.integer({ min: 1, max: 10000, default: 1000, summary: 'At most this many past events (activity only).' }),
  }

  #agentOutput = false

  async execute(): Promise<Logs | undefined> {
    const { args, flags } = await this.parse(WorkspaceLogs)
    if (!flags.activity) return this.#agent(args.id, flags.follow)
    const page = await this.client.queryAudit({ order: 'asc', limit: flags.limit, filter: ['category=activity'] }, { workspaceId: args.id })
    if (!flags.follow) return page.events
    const json = this.jsonEnabled()
    const print = (e: AuditEvent) => process.stdout.write((json ? JSON.stringify(e) : eventLine(e)) + '\n')
    for (const e of page.events) print(e)
    const last = page.events.at(-1)?.id
    await this.#untilInterrupted((signal) => followActivity(this.client, { workspaceId: args.id, filter: ['category=activity'], ...(last ? { lastEventId: last } : {}), signal, onEvent: print }))
    return undefined
  }

  async #agent(id: string, follow: boolean): Promise<Logs | undefined> {
    const { chunks, next } = await allAgentLogs(this.client, id)
    if (!follow) {
      this.#agentOutput = true
      return chunks
    }
    const json = this.jsonEnabled()
    const print = (c: AgentLogChunk) => process.stdout.write(json ? JSON.stringify(c) + '\n' : c.text)
    for (const c of chunks) print(c)
    await this.#untilInterrupted((signal) => followAgentLogs(this.client, id, { after: next, signal, onChunk: print }))
    return undefined
  }

  async #untilInterrupted(run: (signal: AbortSignal) => Promise<void>): Promise<void> {
    const stop = new AbortController()
    const onSignal = () => stop.abort()
    process.once('SIGINT', onSignal)
    process.once('SIGTERM', onSignal)
    try {
      await run(stop.signal)
    } finally {
      process.off('SIGINT', onSignal)
      process.off('SIGTERM', onSignal)
    }
  }

  protected override render(logs: Logs | undefined): void {
    if (!logs) return
    if (this.#agentOutput) for (const c of logs as AgentLogChunk[]) process.stdout.write(c.text)
    else for (const e of logs as AuditEvent[]) process.stdout.write(eventLine(e) + '\n')
  }
}
