// One database writer for `corral proxy --workers N` on SQLite. SQLite takes one writer at a time:
// N workers each committing their own audit batches contend for its write lock (the busy handler
// sleeps, a lock attempt fails and is retried), each commit makes the other workers re-read the
// pages it changed, and N writers group their rows into N times as many commits. So on SQLite a
// worker hands each batch of rows its audit writer would insert to the primary over the cluster's
// IPC channel, and the primary inserts what every worker handed it since its last commit in one
// transaction (one writer, batches merged across workers).
//
// Durability is unchanged: a worker's audit writer journals each row before its answer, exactly as
// alone; only the journal-to-database stage travels. A batch counts as stored (and its journal
// segment as done) when the primary has committed it. A worker that dies mid-batch has its journal
// replayed by its replacement (inserts are idempotent on id); a primary that dies takes its workers
// with it (the cluster closes their channel) and the next start replays every journal. A merged
// insert the database refuses is tried again one worker's batch at a time, so one worker's bad row
// never fails another worker's batch; errors travel with their code and message, so the worker's
// audit writer classifies them (retry or split) exactly as the database's own.
import type { Worker } from 'node:cluster'
import type { Store } from '../store/index.js'

const ROWS = 'corral-proxy-rows'
const STORED = 'corral-proxy-rows-stored'

interface RowsMessage { type: typeof ROWS; n: number; lines: readonly string[] }
interface StoredMessage { type: typeof STORED; n: number; ids?: string[]; error?: { message: string; code?: string } }

interface Pending { worker: Worker; n: number; lines: string[] }

/** The row's id: every encoded line starts with its columns before any nested value, `id` among them. */
function lineId(line: string): string | undefined {
  const at = line.indexOf('"id":"')
  return at < 0 ? undefined : line.slice(at + 6, line.indexOf('"', at + 6))
}

/** The primary's side: every worker's batches, inserted one merged transaction at a time. */
export class RowsWriter {
  readonly #store: Store
  #queue: Pending[] = []
  #running: Promise<void> | undefined

  constructor(store: Store) {
    this.#store = store
  }

  /** Takes this worker's batches. */
  attach(worker: Worker): void {
    worker.on('message', (m: unknown) => {
      const msg = m as Partial<RowsMessage> | null
      if (msg?.type !== ROWS || typeof msg.n !== 'number' || !Array.isArray(msg.lines)) return
      this.#queue.push({ worker, n: msg.n, lines: msg.lines })
      this.#running ??= this.#drain().finally(() => (this.#running = undefined))
    })
  }

  /** Resolves once no batch is being inserted (the pool stops after its workers have exited). */
  async idle(): Promise<void> {
    while (this.#running) await this.#running
  }

  async #drain(): Promise<void> {
    while (this.#queue.length > 0) {
      const batch = this.#queue
      this.#queue = []
      try {
        const ids = await this.#store.audit.insertEncodedReturningIds(batch.flatMap((p) => p.lines))
        const fresh = new Set(ids)
        for (const p of batch) reply(p, { ids: p.lines.map(lineId).filter((id): id is string => id !== undefined && fresh.has(id)) })
      } catch (err) {
        if (batch.length === 1) {
          reply(batch[0]!, { error: wire(err) })
          continue
        }
        // One worker's refused row must not fail the others' batches: each on its own.
        for (const p of batch) {
          await this.#store.audit.insertEncodedReturningIds(p.lines).then(
            (ids) => reply(p, { ids }),
            (e: unknown) => reply(p, { error: wire(e) }),
          )
        }
      }
    }
  }
}

/** A worker that died meanwhile gets no answer: its replacement replays its journal. */
function reply(p: Pending, body: Omit<StoredMessage, 'type' | 'n'>): void {
  if (!p.worker.isConnected()) return
  p.worker.send({ type: STORED, n: p.n, ...body } satisfies StoredMessage, undefined, () => {})
}

function wire(err: unknown): { message: string; code?: string } {
  const e = err as { message?: unknown; code?: unknown } | undefined
  return { message: typeof e?.message === 'string' ? e.message : String(err), ...(typeof e?.code === 'string' ? { code: e.code } : {}) }
}

/**
 * The worker's side: its store as the audit writer sees it, with the batch insert handed to the
 * primary. Everything else (quarantine, notifications, every other table) stays the worker's own.
 */
export function rowsThroughPrimary(store: Store): Store {
  let next = 0
  const waiting = new Map<number, { resolve(ids: string[]): void; reject(err: Error): void }>()
  const gone = (): Error => Object.assign(new Error('the proxy primary that writes this worker\'s rows is gone (audit worker channel closed); the rows stay in the journal'), { code: 'EPIPE' })
  process.on('message', (m: unknown) => {
    const msg = m as Partial<StoredMessage> | null
    if (msg?.type !== STORED || typeof msg.n !== 'number') return
    const w = waiting.get(msg.n)
    if (!w) return
    waiting.delete(msg.n)
    if (msg.error) w.reject(Object.assign(new Error(msg.error.message), msg.error.code ? { code: msg.error.code } : {}))
    else w.resolve(msg.ids ?? [])
  })
  process.once('disconnect', () => {
    for (const w of waiting.values()) w.reject(gone())
    waiting.clear()
  })
  const insertEncodedReturningIds = (lines: readonly string[]): Promise<string[]> => {
    if (lines.length === 0) return Promise.resolve([])
    if (!process.connected || !process.send) return Promise.reject(gone())
    const n = next++
    return new Promise<string[]>((resolve, reject) => {
      waiting.set(n, { resolve, reject })
      process.send!({ type: ROWS, n, lines } satisfies RowsMessage, undefined, {}, (err: Error | null) => {
        if (!err || !waiting.delete(n)) return
        reject(gone())
      })
    })
  }
  return { ...store, audit: { ...store.audit, insertEncodedReturningIds } }
}
