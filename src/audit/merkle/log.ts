// The provable log's upkeep in serve: the appender moves committed rows from the queue
// (audit_log_pending, filled by a trigger in each row's own transaction) into their org's tree,
// off the writer's path (the proxy waits for the journal, the writer for its batch; neither waits
// for this); the checkpointer signs each tree that grew at a fixed cadence (and on demand) and
// publishes the checkpoint to the witness. Any number of replicas run both: an append is one
// conditional transaction (the loser retries, src/store/audit-log.ts) and one checkpoint per
// (org, size) is stored whichever replica signed it, so every org has one sequence of checkpoints.
import { randomUUID } from 'node:crypto'
import { nowIso } from '../../contract/index.js'
import type { Store, StoredCheckpoint } from '../../store/index.js'
import type { AuditWriterLogger } from '../writer-types.js'
import { drainQueue } from './append.js'
import { AppendHost } from './append-host.js'
import { AppendPacer, type PaceOptions } from './pace.js'
import { signCheckpoint } from './note.js'
import type { LogSigner } from './signer.js'
import type { WitnessDir } from './witness.js'

export const LOG_ID_SETTING = 'audit_log_id'

export interface ProvableLogOptions {
  store: Store
  logger: AuditWriterLogger
  /** Without one the log is appended but not checkpointed (a process without the data dir's key). */
  signer?: LogSigner
  witness?: WitnessDir
  /** How often the queue is drained (default 1 s). */
  appendIntervalMs?: number
  /** How often grown trees are signed (default 60 s). */
  checkpointIntervalMs?: number
  /** Queue entries per append round, one transaction (default 5,000). */
  batch?: number
  /**
   * The store's database, to append on a worker thread with a connection of its own (serve);
   * without it the rounds run on this thread (tests, a memory database).
   */
  thread?: { url: string; schema?: string }
  /**
   * Whether this process's writer has a backlog (serve: the audit writer's `backlogged()`): the
   * appender's ticks and the cadence's checkpoints yield to it within `pace`'s bounds (pace.ts).
   * Without it they never yield; with or without it, a tick catches up in slices (pace.ts).
   */
  writerBusy?: () => boolean
  pace?: PaceOptions
}

/** The log's origin line for one org: `corral/audit/<log id>/<org id>`. */
export function logOrigin(logId: string, orgId: string): string {
  return `corral/audit/${logId}/${orgId}`
}

export async function logId(store: Store): Promise<string> {
  return store.settings.setIfAbsent(LOG_ID_SETTING, randomUUID())
}

export class ProvableLog {
  readonly #o: ProvableLogOptions
  readonly #batch: number
  readonly #host: AppendHost | undefined
  readonly #pacer: AppendPacer
  #timers: NodeJS.Timeout[] = []
  #appending: { run: Promise<number>; paced: boolean } | undefined
  #signing: Promise<StoredCheckpoint[]> | undefined
  #stopped = false

  constructor(opts: ProvableLogOptions) {
    this.#o = opts
    this.#batch = Math.max(1, opts.batch ?? 5_000)
    const memory = opts.thread?.url.startsWith('sqlite:') && opts.thread.url.includes(':memory:')
    this.#host = opts.thread && !memory
      ? new AppendHost({ ...opts.thread, batch: this.#batch }, {
          pending: async () => (await opts.store.auditLog.pending(1)).length > 0,
          ...(opts.writerBusy ? { busy: opts.writerBusy } : {}),
          ...(opts.pace ? { pace: opts.pace } : {}),
        })
      : undefined
    this.#pacer = new AppendPacer(opts.writerBusy ?? (() => false), opts.pace)
  }

  start(): void {
    const tick = (what: string, fn: () => Promise<unknown>) => () => {
      if (this.#stopped) return
      fn().catch((err: unknown) => this.#o.logger.error({ err: String((err as Error)?.message ?? err) }, `audit log: ${what} failed; tried again at the next tick`))
    }
    this.#timers.push(setInterval(tick('append', () => this.append({ paced: true })), this.#o.appendIntervalMs ?? 1_000))
    if (this.#o.signer) this.#timers.push(setInterval(tick('checkpoint', () => this.#checkpoint(undefined, true)), this.#o.checkpointIntervalMs ?? 60_000))
    for (const t of this.#timers) t.unref()
  }

  /** Stops the timers and waits for a round in flight. */
  async stop(): Promise<void> {
    this.#stopped = true
    for (const t of this.#timers) clearInterval(t)
    this.#timers = []
    // The worker ends its round in flight and exits; a round started meanwhile finds it closed.
    await Promise.allSettled([this.#appending?.run, this.#signing, this.#host?.close()])
  }

  /**
   * Appends every queued row; returns how many leaves this process added. `paced` (the ticks),
   * rounds are held back while the writer has a backlog within the lag's bounds; unpaced (an
   * on-demand checkpoint, a drain), every queued row is appended, after a paced append in flight.
   */
  append(opts: { paced?: boolean } = {}): Promise<number> {
    const paced = opts.paced === true
    const cur = this.#appending
    if (cur && (paced || !cur.paced)) return cur.run
    const go = () => this.#appendAll(paced)
    const run: Promise<number> = (cur ? cur.run.then(go, go) : go()).finally(() => {
      if (this.#appending?.run === run) this.#appending = undefined
    })
    this.#appending = { run, paced }
    return run
  }

  /** Appends, then signs every tree (or `orgId`'s) that grew since its last checkpoint; returns the latest checkpoint of each tree signed or published. */
  checkpoint(orgId?: string): Promise<StoredCheckpoint[]> {
    return this.#checkpoint(orgId, false)
  }

  /** The cadence's checkpoints are paced: they sign what is appended and leave the writer's burst alone. */
  #checkpoint(orgId: string | undefined, paced: boolean): Promise<StoredCheckpoint[]> {
    const run = async () => {
      await this.append({ paced })
      return this.#signAll(orgId)
    }
    const p = (this.#signing ?? Promise.resolve([])).then(run, run)
    this.#signing = p.finally(() => {
      if (this.#signing === p) this.#signing = undefined
    })
    return p
  }

  async #appendAll(paced: boolean): Promise<number> {
    const pacer = paced ? this.#pacer : undefined
    let r
    if (this.#host) {
      // With no thread up, this thread's pacer decides whether to start one: a thread's start (its
      // isolate, its sources, its connection) is itself work a writer's burst should not share the
      // cores with. A thread up paces its own rounds.
      const admitted = pacer !== undefined && !this.#host.running
      if (admitted && !(await pacer.admit(this.#o.store))) return 0
      r = await this.#host.append(paced, admitted)
    } else {
      r = await drainQueue(this.#o.store, this.#batch, () => this.#stopped, pacer)
    }
    if (r.unreadable.length > 0) {
      this.#o.logger.error({ ids: r.unreadable.slice(0, 20), count: r.unreadable.length }, 'audit log: rows that do not read as stored (edited in the database) were appended under an unreadable leaf; corral audit verify reports each as changed')
    }
    return r.added
  }

  async #signAll(only?: string): Promise<StoredCheckpoint[]> {
    const { store, signer, witness } = this.#o
    if (!signer) return []
    const id = await logId(store)
    const { key, verifier } = await signer.current()
    await store.auditLog.putKey(verifier.name, verifier.vkey, nowIso())
    await witness?.publishKey(verifier.name, verifier.vkey)
    const out: StoredCheckpoint[] = []
    for (const tree of await store.auditLog.trees()) {
      if (only !== undefined && tree.orgId !== only) continue
      let cp = await store.auditLog.latestCheckpoint(tree.orgId)
      if (!cp || cp.size < tree.size) {
        const signed = signCheckpoint({ origin: logOrigin(id, tree.orgId), size: tree.size, root: Buffer.from(tree.root, 'hex'), time: nowIso() }, verifier.name, key)
        cp = await store.auditLog.putCheckpoint({ orgId: tree.orgId, size: signed.size, root: tree.root, time: signed.time, keyName: signed.keyName, note: signed.note })
      }
      if (witness && (await witness.publishCheckpoint(tree.orgId, cp.size, cp.note)) === 'forked') {
        this.#o.logger.error({ org: tree.orgId, size: cp.size }, 'audit log: the witness holds a different checkpoint of this size; not replaced (a fork: run corral audit verify)')
      }
      out.push(cp)
    }
    return out
  }
}
