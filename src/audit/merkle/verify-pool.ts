// The threads a verification runs on (verify-worker.ts), one per core the process may use: ranges
// of the log are handed out as they are cut, each thread reads (database) or takes (export) its
// range and checks it, and the results come back in the log's order for the walk to fold.
// Two ranges in flight per thread keep a thread busy while the main thread folds the one before,
// and bound what is held in memory.
import { availableParallelism } from 'node:os'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { Worker } from 'node:worker_threads'
import { builtFile } from '../../proc/index.js'
import type { RangeResult } from './range-check.js'
import type { VerifyJob, VerifyReply, VerifyWorkerData } from './verify-worker.js'

type Job = VerifyJob extends infer J ? (J extends { id: number } ? Omit<J, 'id'> : never) : never
interface Waiter { resolve: (r: RangeResult) => void; reject: (err: Error) => void }

const PER_THREAD = 2

/** Runs `jobs` on `threads` verification threads; yields their results in the jobs' order. */
export async function* runRanges(data: VerifyWorkerData, jobs: AsyncIterable<Job> | Iterable<Job>, threads = availableParallelism()): AsyncGenerator<RangeResult> {
  const pool = await Promise.all(Array.from({ length: Math.max(1, threads) }, () => spawn(data)))
  const inFlight: Array<Promise<RangeResult>> = []
  let next = 0
  try {
    const it = (Symbol.asyncIterator in jobs ? jobs[Symbol.asyncIterator]() : (jobs as Iterable<Job>)[Symbol.iterator]()) as AsyncIterator<Job> | Iterator<Job>
    let done = false
    for (;;) {
      while (!done && inFlight.length < pool.length * PER_THREAD) {
        const r = await it.next()
        if (r.done) done = true
        else {
          const p = pool[next++ % pool.length].run(r.value)
          p.catch(() => {})
          inFlight.push(p)
        }
      }
      const head = inFlight.shift()
      if (!head) return
      yield await head
    }
  } finally {
    await Promise.all(pool.map((w) => w.close()))
  }
}

interface Thread { run(job: Job): Promise<RangeResult>; close(): Promise<void> }

function spawn(data: VerifyWorkerData): Promise<Thread> {
  const worker = import.meta.url.endsWith('.ts')
    ? new Worker(throughTsx(new URL('./verify-worker.ts', import.meta.url).href), { eval: true, workerData: data })
    : new Worker(builtFile(import.meta.url, './verify-worker.js', 'workers/verify-worker.js'), { workerData: data })
  const waiting = new Map<number, Waiter>()
  let seq = 0
  let exited = false
  const exit = new Promise<void>((r) => worker.once('exit', () => r()))
  const thread: Thread = {
    run(job) {
      if (exited) return Promise.reject(new Error('the verification thread has exited'))
      const id = ++seq
      return new Promise<RangeResult>((resolve, reject) => {
        waiting.set(id, { resolve, reject })
        const transfer = job.kind === 'bundle' ? [job.leaves.buffer as ArrayBuffer, job.rows.buffer as ArrayBuffer] : []
        worker.postMessage({ ...job, id }, transfer)
      })
    },
    async close() {
      if (!exited) worker.postMessage({ kind: 'close' })
      await exit
    },
  }
  return new Promise<Thread>((ready, failed) => {
    worker.on('message', (m: VerifyReply) => {
      if ('ready' in m) return ready(thread)
      if ('failed' in m) return failed(new Error(`a verification thread could not open the store: ${m.failed}`))
      const w = waiting.get(m.id)
      if (!w) return
      waiting.delete(m.id)
      if ('error' in m) w.reject(new Error(m.error))
      else w.resolve(m.result)
    })
    const lost = (err: Error) => {
      exited = true
      failed(err)
      for (const w of waiting.values()) w.reject(err)
      waiting.clear()
    }
    worker.on('error', (err) => lost(new Error(`a verification thread failed: ${err.message}`)))
    worker.on('exit', (code) => lost(new Error(`a verification thread exited (${code})`)))
  })
}

/**
 * Run from the sources (tests, benchmarks), the worker is TypeScript: a worker does not inherit the
 * parent's module hooks on Node 20, so a small script registers tsx's ESM hooks and then imports
 * the entry. The built package (dist) starts the .js entry directly.
 */
function throughTsx(entry: string): string {
  const api = pathToFileURL(join(dirname(createRequire(import.meta.url).resolve('tsx/package.json')), 'dist/esm/api/index.mjs')).href
  return `import(${JSON.stringify(api)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}) })`
}
