// Runs the appender's rounds on a worker thread (append-worker.ts) with its own connection to the
// store's database: serve's event loop only posts a message per tick. The worker is started at the
// first append that has queued rows to take (`pending`, one indexed read on this thread's
// connection, says so while no worker is up), exits once no round has added a leaf for
// `idleExitMs` (a thread costs its own isolate and connection; an idle serve appends nothing), is
// referenced only while a request is in flight (an idle worker never keeps a process alive) and is
// started again after a crash, which fails the requests in flight (the next tick retries: an
// append is one transaction, so a crash mid-round stores nothing of it).
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { Worker } from 'node:worker_threads'
import { builtFile, workerLimits } from '../../proc/index.js'
import type { Drained } from './append.js'
import type { AppendReply, AppendWorkerData } from './append-worker.js'
import type { PaceOptions } from './pace.js'

/** The worker's niceness above the process's (append-worker.ts says why). */
const APPENDER_NICER = 10

interface Waiter { resolve: (r: Drained) => void; reject: (err: Error) => void }

export interface AppendHostOptions {
  /** Whether the queue holds a row; without it the worker, once started, stays up. */
  pending?: () => Promise<boolean>
  /** How long a worker whose rounds add nothing stays up (default 30 s). */
  idleExitMs?: number
  /** Whether this process's writer has a backlog: paced appends yield to it (pace.ts). */
  busy?: () => boolean
  pace?: PaceOptions
}

const IDLE_EXIT_MS = 30_000
/** How often the writer's backlog is copied to the worker while it is up: a burst gets the lock back within this and one round. */
const BUSY_REFRESH_MS = 20
const nothing = (): Drained => ({ added: 0, unreadable: [] })

export class AppendHost {
  readonly #data: AppendWorkerData
  readonly #o: AppendHostOptions
  #worker: Worker | undefined
  #ready: Promise<Worker> | undefined
  readonly #waiting = new Map<number, Waiter>()
  #seq = 0
  #closed = false
  #idle: NodeJS.Timeout | undefined
  #retiring: { worker: Worker; exited: Promise<void> } | undefined
  readonly #busy: Int32Array | undefined
  #refresh: NodeJS.Timeout | undefined

  constructor(data: AppendWorkerData, options: AppendHostOptions = {}) {
    this.#o = options
    // One shared cell the worker reads before each paced round, so it learns of a burst that
    // starts mid-drain without a message (its event loop is busy with the round).
    this.#busy = options.busy ? new Int32Array(new SharedArrayBuffer(4)) : undefined
    this.#data = { ...data, ...(this.#busy ? { busy: this.#busy.buffer as SharedArrayBuffer } : {}), ...(options.pace ? { pace: options.pace } : {}) }
  }

  /** Whether a worker thread is up (or starting). */
  get running(): boolean {
    return this.#ready !== undefined
  }

  /**
   * Drains the queue on the worker; resolves with the leaves it added. `paced`, the worker holds
   * rounds back while the writer has a backlog within the lag's bounds (`deferred` says it did);
   * `admitted`, the caller's pacer let the first round through.
   */
  async append(paced = false, admitted = false): Promise<Drained> {
    if (this.#closed) return nothing()
    if (!this.#ready && this.#o.pending && !(await this.#o.pending())) return nothing()
    if (this.#closed) return nothing()
    const worker = await (this.#ready ??= this.#spawn())
    const id = ++this.#seq
    return new Promise<Drained>((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject })
      worker.ref()
      this.#copyBusy()
      worker.postMessage({ type: 'append', id, paced, ...(admitted ? { admitted } : {}) })
    })
  }

  async close(): Promise<void> {
    this.#closed = true
    clearTimeout(this.#idle)
    clearInterval(this.#refresh)
    if (this.#retiring) {
      // Referenced until it exits: otherwise a process with nothing else to do would end first.
      this.#retiring.worker.ref()
      await this.#retiring.exited
    }
    const ready = this.#ready
    this.#ready = undefined
    const worker = await ready?.catch(() => undefined)
    if (!worker) return
    const exited = new Promise<void>((r) => worker.once('exit', () => r()))
    worker.ref()
    worker.postMessage({ type: 'close' })
    await exited
  }

  /** (Re)starts the idle clock: a worker that adds no leaf until it runs out is let go. */
  #idleFrom(): void {
    if (this.#o.pending === undefined) return
    clearTimeout(this.#idle)
    this.#idle = setTimeout(() => this.#retire(), this.#o.idleExitMs ?? IDLE_EXIT_MS).unref()
  }

  /** Lets an idle worker go: forgotten first (its exit is not a loss), then asked to close its connection. */
  #retire(): void {
    const worker = this.#worker
    if (!worker || this.#closed) return
    if (this.#waiting.size > 0) return this.#idleFrom()
    clearInterval(this.#refresh)
    this.#ready = undefined
    this.#worker = undefined
    const exited = new Promise<void>((r) => worker.once('exit', () => r()))
    const retiring = { worker, exited }
    this.#retiring = retiring
    void exited.then(() => {
      if (this.#retiring === retiring) this.#retiring = undefined
    })
    worker.postMessage({ type: 'close' })
  }

  #copyBusy(): void {
    if (this.#busy) Atomics.store(this.#busy, 0, this.#o.busy!() ? 1 : 0)
  }

  /** Copies the writer's backlog to the worker while it is up (an unreferenced timer: it keeps no process alive). */
  #watchBusy(): void {
    if (!this.#busy) return
    clearInterval(this.#refresh)
    this.#refresh = setInterval(() => this.#copyBusy(), BUSY_REFRESH_MS).unref()
  }

  #spawn(): Promise<Worker> {
    // The idle clock starts when this worker is ready: an earlier worker's must not retire it.
    clearTimeout(this.#idle)
    const opts = { workerData: { nicer: APPENDER_NICER, ...this.#data }, resourceLimits: workerLimits() }
    const worker = import.meta.url.endsWith('.ts')
      ? new Worker(throughTsx(new URL('./append-worker.ts', import.meta.url).href), { ...opts, eval: true })
      : new Worker(builtFile(import.meta.url, './append-worker.js', 'workers/append-worker.js'), opts)
    this.#worker = worker
    return new Promise<Worker>((ready, failed) => {
      worker.on('message', (m: AppendReply) => {
        if ('ready' in m) {
          this.#idleFrom()
          this.#watchBusy()
          return ready(worker)
        }
        if ('failed' in m) return failed(new Error(`the appender's thread could not open the store: ${m.failed}`))
        const w = this.#waiting.get(m.id)
        if (!w) return
        this.#waiting.delete(m.id)
        if (this.#waiting.size === 0) worker.unref()
        if ('error' in m) w.reject(new Error(m.error))
        else {
          if (m.added > 0) this.#idleFrom()
          w.resolve({ added: m.added, unreadable: m.unreadable, ...(m.deferred ? { deferred: true } : {}) })
        }
      })
      const lost = (err: Error) => {
        failed(err)
        if (this.#worker !== worker) return
        clearInterval(this.#refresh)
        this.#worker = undefined
        this.#ready = undefined
        const waiting = [...this.#waiting.values()]
        this.#waiting.clear()
        for (const w of waiting) w.reject(err)
      }
      worker.on('error', (err) => lost(new Error(`the appender's thread failed: ${err.message}`)))
      worker.on('exit', (code) => lost(new Error(`the appender's thread exited (${code})`)))
    })
  }
}

/**
 * Run from the sources (tests, benchmarks), the worker is TypeScript: a worker does not inherit the
 * parent's module hooks on Node 20, and `--import tsx` in its execArgv registers them too late for
 * its entry, so a small script registers tsx's ESM hooks and then imports the entry. The built
 * package (dist) starts the .js entry directly and never needs tsx.
 */
function throughTsx(entry: string): string {
  const api = pathToFileURL(join(dirname(createRequire(import.meta.url).resolve('tsx/package.json')), 'dist/esm/api/index.mjs')).href
  return `import(${JSON.stringify(api)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}) })`
}
