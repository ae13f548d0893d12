import type { Writable } from 'node:stream'
import { type Dispatcher, request } from 'undici'
import type { AgentEventType } from '../contract/index.js'

/** The body the agent posts for one event: `type` from the closed enum plus event fields (the audit row's `detail`). */
export interface AgentEvent {
  type: AgentEventType
  [field: string]: unknown
}

/** Where agent events go. Delivery failures are the sink's problem: they never fail the task. */
export interface EventSink {
  emit(taskId: string, event: AgentEvent): Promise<void>
}

/**
 * Posts `POST <base>/task/<id>/event` through the proxy (control-plane.md "Agent events"). The
 * proxy validates the body, debits the `agent_events` counter and forwards it to the audit log.
 * A refusal (budget exhausted, schema) is reported on stderr once per status and then ignored.
 * A 503 (the audit log or its database is briefly away: docs/reliability.md) is retried after its
 * Retry-After, a bounded number of times, so an outage of a few seconds loses no event; the agent
 * awaits each emit, so retries keep the events in order.
 */
export class HttpEventSink implements EventSink {
  readonly #base: string
  readonly #dispatcher: Dispatcher
  readonly #warned = new Set<string>()
  readonly #log: (line: string) => void

  readonly #retry: { attempts: number; maxDelayMs: number }

  constructor(
    baseUrl: string,
    dispatcher: Dispatcher,
    log: (line: string) => void = (l) => process.stderr.write(`${l}\n`),
    retry: { attempts?: number; maxDelayMs?: number } = {},
  ) {
    this.#base = baseUrl.replace(/\/+$/, '')
    this.#dispatcher = dispatcher
    this.#log = log
    this.#retry = { attempts: retry.attempts ?? 6, maxDelayMs: retry.maxDelayMs ?? 5_000 }
  }

  async emit(taskId: string, event: AgentEvent): Promise<void> {
    const url = `${this.#base}/task/${encodeURIComponent(taskId)}/event`
    const body = JSON.stringify(event)
    try {
      for (let attempt = 1; ; attempt++) {
        const res = await request(url, { method: 'POST', dispatcher: this.#dispatcher, headers: { 'content-type': 'application/json' }, body })
        const text = await res.body.text()
        if (res.statusCode === 503 && attempt < this.#retry.attempts) {
          const after = Number(res.headers['retry-after'])
          await new Promise((r) => setTimeout(r, Math.min(Number.isFinite(after) && after >= 0 ? after * 1000 : 1000, this.#retry.maxDelayMs)))
          continue
        }
        if (res.statusCode >= 300) this.#warnOnce(`status ${res.statusCode}`, `event ${event.type} refused (${res.statusCode}): ${text.slice(0, 300)}`)
        return
      }
    } catch (err) {
      this.#warnOnce((err as Error).name, `event ${event.type} not delivered: ${(err as Error).message}`)
    }
  }

  #warnOnce(key: string, line: string): void {
    if (this.#warned.has(key)) return
    this.#warned.add(key)
    this.#log(`corral agent: ${line}`)
  }
}

/** Keeps events in memory (tests, and a caller that wants the trace). */
export class MemoryEventSink implements EventSink {
  readonly events: Array<AgentEvent & { task_id: string }> = []
  async emit(taskId: string, event: AgentEvent): Promise<void> {
    this.events.push({ ...event, task_id: taskId })
  }
  types(): string[] {
    return this.events.map((e) => e.type)
  }
}

/** Writes one JSON line per event (`corral agent --events -`, for running an agent by hand). */
export class NdjsonEventSink implements EventSink {
  constructor(readonly out: Writable) {}
  async emit(taskId: string, event: AgentEvent): Promise<void> {
    this.out.write(`${JSON.stringify({ task_id: taskId, ...event })}\n`)
  }
}
