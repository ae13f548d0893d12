// The appender's thread (append-host.ts): its own store connection on the same database, so the
// queue's read, every row's encoding and hashing, and the append transactions (synchronous on
// SQLite) never run on the event loop that serves the API and the proxy.
import { getPriority, setPriority } from 'node:os'
import { parentPort, workerData } from 'node:worker_threads'
import type { PaceOptions } from './pace.js'

export interface AppendWorkerData {
  url: string
  schema?: string
  batch: number
  /** How much nicer than the process this thread runs (Linux keeps a nice value per thread). */
  nicer?: number
  /** The writer's backlog flag (an Int32Array's one cell, 1 while backlogged), kept by the host; without it the writer is never backlogged. */
  busy?: SharedArrayBuffer
  pace?: PaceOptions
}
export type AppendRequest = { type: 'append'; id: number; paced: boolean; admitted?: boolean } | { type: 'close' }
export type AppendReply = { id: number; added: number; unreadable: string[]; deferred?: boolean } | { id: number; error: string } | { ready: true } | { failed: string }

const port = parentPort!
const data = workerData as AppendWorkerData
// Appending trails the writer by design (checkpoints cover what is appended), so under contention
// for the cores the writer and the proxy come first and the appender takes what they leave: it
// catches up when the burst ends. Only ever lowered, which needs no privilege. Only on Linux, where
// the nice value is per thread: elsewhere it would lower the whole process.
if (data.nicer && process.platform === 'linux') {
  try {
    setPriority(Math.min(19, getPriority() + data.nicer))
  } catch {
    // Left at the process's priority.
  }
}
// Loaded after the priority is lowered: loading and compiling the store and the log's modules is
// most of a thread's start, and it starts while the proxy is answering.
const { openStore } = await import('../../store/index.js')
const { drainQueue } = await import('./append.js')
const { AppendPacer } = await import('./pace.js')
const busy = data.busy ? new Int32Array(data.busy) : undefined
// Kept across requests: the lag's clock is the worker's for as long as it is up. Without the
// writer's flag the ticks never yield, and still catch up in slices.
const pacer = new AppendPacer(busy ? () => Atomics.load(busy, 0) === 1 : () => false, data.pace)
let stopping = false
let running: Promise<unknown> = Promise.resolve()
try {
  // The process opened and migrated the store already: this connection only reads and appends.
  const store = await openStore(data.url, { ...(data.schema ? { schema: data.schema } : {}), poolSize: 2, secondary: true })
  port.on('message', (m: AppendRequest) => {
    if (m.type === 'close') {
      // The round in flight ends (drainQueue stops between rounds), then the connection closes.
      stopping = true
      void running.then(() => store.close()).finally(() => port.close())
      return
    }
    running = drainQueue(store, data.batch, () => stopping, m.paced ? pacer : undefined, m.admitted === true).then(
      (r) => port.postMessage({ id: m.id, added: r.added, unreadable: r.unreadable, ...(r.deferred ? { deferred: true } : {}) } satisfies AppendReply),
      (err: unknown) => port.postMessage({ id: m.id, error: String((err as Error)?.message ?? err) } satisfies AppendReply),
    )
  })
  port.postMessage({ ready: true } satisfies AppendReply)
} catch (err) {
  port.postMessage({ failed: String((err as Error)?.message ?? err) } satisfies AppendReply)
}
