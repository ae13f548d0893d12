// Runs the appender's rounds on a worker thread (append-worker.ts) with its own connection to the
// store's database: serve's event loop only posts a message per tick. The worker is started at the
// first append, referenced only while a request is in flight (an idle worker never keeps a process
// alive) and started again after a crash, which fails the requests in flight (the next tick
// retries: an append is one transaction, so a crash mid-round stores nothing of it).
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { Worker } from 'node:worker_threads'
import type { Drained } from './append.js'
import type { AppendReply, AppendWorkerData } from './append-worker.js'

/**
 * A round holds its thousands of rows (about 6 MB as the driver returns them) until it ends: with
 * the default young generation they outlive several scavenges and are copied into the old one, a
 * seventh of a leaf's cost. Semi-spaces of 64 MB (young generation = 3 of them) let a round's rows
 * die young; the space is committed only as it fills.
 */
const YOUNG_GENERATION_MB = 192

interface Waiter { resolve: (r: Drained) => void; reject: (err: Error) => void }

export class AppendHost {
  readonly #data: AppendWorkerData
  #worker: Worker | undefined
  #ready: Promise<Worker> | undefined
  readonly #waiting = new Map<number, Waiter>()
  #seq = 0
  #closed = false

  constructor(data: AppendWorkerData) {
    this.#data = data
  }

  /** Drains the queue on the worker; resolves with the leaves it added. */
  async append(): Promise<Drained> {
    if (this.#closed) return { added: 0, unreadable: [] }
    const worker = await (this.#ready ??= this.#spawn())
    const id = ++this.#seq
    return new Promise<Drained>((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject })
      worker.ref()
      worker.postMessage({ type: 'append', id })
    })
  }

  async close(): Promise<void> {
    this.#closed = true
    const ready = this.#ready
    this.#ready = undefined
    const worker = await ready?.catch(() => undefined)
    if (!worker) return
    const exited = new Promise<void>((r) => worker.once('exit', () => r()))
    worker.ref()
    worker.postMessage({ type: 'close' })
    await exited
  }

  #spawn(): Promise<Worker> {
    const opts = { workerData: this.#data, resourceLimits: { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB } }
    const worker = import.meta.url.endsWith('.ts')
      ? new Worker(throughTsx(new URL('./append-worker.ts', import.meta.url).href), { ...opts, eval: true })
      : new Worker(new URL('./append-worker.js', import.meta.url), opts)
    this.#worker = worker
    return new Promise<Worker>((ready, failed) => {
      worker.on('message', (m: AppendReply) => {
        if ('ready' in m) return ready(worker)
        if ('failed' in m) return failed(new Error(`the appender's thread could not open the store: ${m.failed}`))
        const w = this.#waiting.get(m.id)
        if (!w) return
        this.#waiting.delete(m.id)
        if (this.#waiting.size === 0) worker.unref()
        if ('error' in m) w.reject(new Error(m.error))
        else w.resolve({ added: m.added, unreadable: m.unreadable })
      })
      const lost = (err: Error) => {
        failed(err)
        if (this.#worker !== worker) return
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
