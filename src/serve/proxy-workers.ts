// `corral proxy --workers N`: the proxy in N worker processes on one listening port (node:cluster;
// on Linux the primary accepts each connection and hands it to the workers in turn, so a
// connection and every request on it stay in one worker, and the primary does no per-request work).
// Each worker is a complete `corral proxy` (proxy-alone.ts): its own store connection, audit writer
// and journal directory (named by its pid, docs/reliability.md), its own active workspaces and
// budget leases (ceilings are leased from the store ledger across processes, src/proxy/budgets.ts).
//
// The primary prepares what the workers would otherwise race to create (the schema, the CA, the
// master and token keys), forks them, reports ready once every worker listens, replaces a worker
// that dies (its replacement replays the journal the dead one left: its pid is gone; its
// `max_concurrent` permits go back to the database at once, as its replica row names them, rather
// than one lease TTL later: a dead process holds nothing in flight), and on stop
// sends each worker SIGTERM and waits for it (each drains its requests and flushes its audit log).
// A worker whose primary goes away (kill -9) exits at once when the IPC channel closes (Node's
// cluster does that for a worker); what it journaled is replayed by the next start.
import cluster, { type Worker } from 'node:cluster'
import { resolve } from 'node:path'
import type { Logger } from 'pino'
import { loadOrCreateCa } from '../proxy/index.js'
import { loadMasterKey, loadTokenKey } from '../secrets/index.js'
import { defaultStoreUrl, openStore, replicaLeases } from '../store/index.js'
import type { ProxyAloneOptions, RunningProxyAlone } from './proxy-alone.js'

/** The message a worker sends its primary once it listens. */
const READY = 'corral-proxy-worker-ready'
/** How long stop() waits for the workers to drain before killing them. */
const STOP_BOUND_MS = 25_000
/** Backoff between replacements of a worker that keeps dying before it listens. */
const RESTART_MIN_MS = 250
const RESTART_MAX_MS = 30_000

/**
 * The default of `--workers`: one process. Where cores are few, two workers cost more CPU per
 * request and a worse tail than one (docs/proxy.md "Worker processes"); more workers pay only where
 * cores outnumber the proxy's neighbours, so the operator opts in.
 */
export function defaultProxyWorkers(): number {
  return 1
}

/** True in a process forked by startProxyWorkers. */
export function isProxyWorker(): boolean {
  return cluster.isWorker
}

/**
 * Lets go of the primary once the worker is done (stopped, or failed to start): the IPC channel
 * would keep it alive. `worker.disconnect()`, not `process.disconnect()`: the latter makes Node's
 * cluster exit at once with code 0, hiding a start failure's exit code from the primary.
 */
export function releaseProxyWorker(): void {
  if (cluster.worker && process.connected) cluster.worker.disconnect()
}

/** Tells the primary this worker listens on `url`, and which replica row holds its permits (PostgreSQL). */
export function announceProxyWorker(url: string, replicaId?: string): void {
  process.send?.({ type: READY, url, ...(replicaId ? { replicaId } : {}) })
}

/** The schema, the CA and the keys, made once before any worker starts (they would race). */
async function prepareShared(options: ProxyAloneOptions, env: NodeJS.ProcessEnv): Promise<void> {
  const dataDir = resolve(options.dataDir)
  await loadMasterKey(dataDir, env)
  const store = await openStore(options.dbUrl ?? defaultStoreUrl(dataDir))
  try {
    await loadTokenKey(store.settings)
  } finally {
    await store.close()
  }
  await loadOrCreateCa(dataDir)
}

export async function startProxyWorkers(options: ProxyAloneOptions & { workers: number }): Promise<RunningProxyAlone> {
  const env = options.env ?? process.env
  const logger = options.logger
  await prepareShared(options, env)
  const pool = new WorkerPool(options.workers, logger, options.dbUrl ?? defaultStoreUrl(resolve(options.dataDir)))
  const url = await pool.start()
  return { logger, url, stop: () => pool.stop() }
}

class WorkerPool {
  readonly #want: number
  readonly #logger: Logger
  readonly #dbUrl: string
  readonly #workers = new Set<Worker>()
  /** Releases of dead workers' permits still running (stop waits for them). */
  readonly #releases = new Set<Promise<void>>()
  #stopping = false
  #backoff = RESTART_MIN_MS

  constructor(want: number, logger: Logger, dbUrl: string) {
    this.#want = want
    this.#logger = logger
    this.#dbUrl = dbUrl
  }

  /** Forks every worker; resolves with the shared address once all listen, rejects if one exits first. */
  start(): Promise<string> {
    // Workers inherit stdout/stderr: their log lines and their one-line start errors go where ours do.
    cluster.setupPrimary({ silent: false })
    return new Promise((done, fail) => {
      let ready = 0
      let url = ''
      const onStartExit = (w: Worker, code: number | null, signal: string | null): void => {
        if (ready >= this.#want || this.#stopping) return
        this.#stopping = true
        void this.#stopAll().catch(() => {}).finally(() => fail(new Error(`proxy worker ${w.process.pid} exited (${signal ?? `code ${code}`}) before it listened`)))
      }
      for (let i = 0; i < this.#want; i++) {
        this.#fork((at) => {
          url = at
          if (++ready === this.#want) done(url)
        }, onStartExit)
      }
    })
  }

  #fork(onReady: (url: string) => void, onStartExit?: (w: Worker, code: number | null, signal: string | null) => void): void {
    const w = cluster.fork()
    this.#workers.add(w)
    let listening = false
    let replicaId: string | undefined
    w.on('message', (m: unknown) => {
      if (typeof m !== 'object' || m === null || (m as { type?: unknown }).type !== READY) return
      listening = true
      const id = (m as { replicaId?: unknown }).replicaId
      if (typeof id === 'string') replicaId = id
      this.#backoff = RESTART_MIN_MS
      onReady(String((m as { url?: unknown }).url))
    })
    w.on('exit', (code, signal) => {
      this.#workers.delete(w)
      // A worker that exits 0 stopped cleanly and deregistered itself.
      if (replicaId && (code !== 0 || signal)) this.#release(replicaId)
      if (!listening && onStartExit) return onStartExit(w, code, signal)
      if (this.#stopping) return
      this.#logger.error({ pid: w.process.pid, code, signal }, 'proxy worker died; starting a replacement (its journal is replayed)')
      const wait = listening ? 0 : this.#backoff
      if (!listening) this.#backoff = Math.min(RESTART_MAX_MS, this.#backoff * 2)
      setTimeout(() => {
        if (!this.#stopping) this.#fork(() => this.#logger.warn({}, 'proxy worker replaced'))
      }, wait).unref()
    })
  }

  /**
   * Deletes a dead worker's replica row and its permits. The process is gone ('exit' came after
   * it), so nothing it held is in flight; a worker that stopped cleanly already did the same.
   * Failing, the permits expire one TTL after its last heartbeat, as without a supervisor.
   */
  #release(replicaId: string): void {
    const done = (async () => {
      const store = await openStore(this.#dbUrl)
      try {
        await replicaLeases(store).deregister(replicaId)
      } finally {
        await store.close()
      }
    })().catch((err: unknown) => this.#logger.warn({ err, replica: replicaId }, "a dead proxy worker's permits could not be released; they expire after the lease TTL"))
      .finally(() => this.#releases.delete(done))
    this.#releases.add(done)
  }

  async stop(): Promise<void> {
    this.#stopping = true
    try {
      await this.#stopAll()
    } finally {
      await Promise.all(this.#releases)
    }
  }

  async #stopAll(): Promise<void> {
    const exits = [...this.#workers].map((w) => new Promise<void>((r) => {
      if (w.isDead()) return r()
      w.once('exit', () => r())
      w.process.kill('SIGTERM')
    }))
    let forced = 0
    const force = setTimeout(() => {
      for (const w of this.#workers) {
        if (w.isDead()) continue
        forced++
        w.process.kill('SIGKILL')
      }
    }, STOP_BOUND_MS)
    await Promise.all(exits)
    clearTimeout(force)
    // What they journaled is replayed at the next start; the stop still failed its bound.
    if (forced > 0) throw new Error(`${forced} proxy worker(s) did not stop within ${STOP_BOUND_MS} ms and were killed; their journals are replayed at the next start`)
  }
}
