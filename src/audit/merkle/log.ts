// The provable log's upkeep in serve: the appender moves committed rows from the queue
// (audit_log_pending, filled by a trigger in each row's own transaction) into their org's tree,
// off the writer's path (the proxy waits for the journal, the writer for its batch; neither waits
// for this); the checkpointer signs each tree that grew at a fixed cadence (and on demand) and
// publishes the checkpoint to the witness. Any number of replicas run both: an append is one
// conditional transaction (the loser retries, src/store/audit-log.ts) and one checkpoint per
// (org, size) is stored whichever replica signed it, so every org has one sequence of checkpoints.
import { randomUUID } from 'node:crypto'
import { nowIso, type AuditEvent } from '../../contract/index.js'
import { AppendConflictError, isUniqueViolation, type LogLeaf, type LogTree, type PendingRow, type Store, type StoredCheckpoint } from '../../store/index.js'
import type { AuditWriterLogger } from '../writer-types.js'
import { rowLeafHash } from './canonical.js'
import { signCheckpoint } from './note.js'
import type { LogSigner } from './signer.js'
import { CompactRange } from './tree.js'
import type { WitnessDir } from './witness.js'

export const LOG_ID_SETTING = 'audit_log_id'

type Queued = PendingRow & { row?: AuditEvent }

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
  /** Rows per append transaction (default 1,000: on SQLite an append runs on the event loop's thread). */
  batch?: number
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
  #timers: NodeJS.Timeout[] = []
  #appending: Promise<number> | undefined
  #signing: Promise<StoredCheckpoint[]> | undefined
  #stopped = false

  constructor(opts: ProvableLogOptions) {
    this.#o = opts
    this.#batch = Math.max(1, opts.batch ?? 1_000)
  }

  start(): void {
    const tick = (what: string, fn: () => Promise<unknown>) => () => {
      if (this.#stopped) return
      fn().catch((err: unknown) => this.#o.logger.error({ err: String((err as Error)?.message ?? err) }, `audit log: ${what} failed; tried again at the next tick`))
    }
    this.#timers.push(setInterval(tick('append', () => this.append()), this.#o.appendIntervalMs ?? 1_000))
    if (this.#o.signer) this.#timers.push(setInterval(tick('checkpoint', () => this.checkpoint()), this.#o.checkpointIntervalMs ?? 60_000))
    for (const t of this.#timers) t.unref()
  }

  /** Stops the timers and waits for a round in flight. */
  async stop(): Promise<void> {
    this.#stopped = true
    for (const t of this.#timers) clearInterval(t)
    this.#timers = []
    await Promise.allSettled([this.#appending, this.#signing])
  }

  /** Appends every queued row; returns how many leaves this process added. */
  append(): Promise<number> {
    this.#appending ??= this.#appendAll().finally(() => (this.#appending = undefined))
    return this.#appending
  }

  /** Appends, then signs every tree (or `orgId`'s) that grew since its last checkpoint; returns the latest checkpoint of each tree signed or published. */
  checkpoint(orgId?: string): Promise<StoredCheckpoint[]> {
    const run = async () => {
      await this.append()
      return this.#signAll(orgId)
    }
    const p = (this.#signing ?? Promise.resolve([])).then(run, run)
    this.#signing = p.finally(() => {
      if (this.#signing === p) this.#signing = undefined
    })
    return p
  }

  async #appendAll(): Promise<number> {
    let added = 0
    for (;;) {
      const pending = await this.#o.store.auditLog.pendingRows(this.#batch)
      if (pending.length === 0 || this.#stopped) return added
      const byOrg = new Map<string, Queued[]>()
      for (const p of pending) {
        const list = byOrg.get(p.orgId)
        if (list) list.push(p)
        else byOrg.set(p.orgId, [p])
      }
      for (const [orgId, rows] of byOrg) {
        try {
          added += await this.#appendOrg(orgId, rows)
        } catch (err) {
          // Another replica extended this tree with these rows first: the next round reads the queue again.
          if (err instanceof AppendConflictError || isUniqueViolation(err)) return added
          throw err
        }
      }
      // Between transactions, let the event loop (the proxy, the writer's callbacks) run.
      await new Promise((r) => setImmediate(r))
    }
  }

  async #appendOrg(orgId: string, queued: Queued[]): Promise<number> {
    return this.#o.store.transaction(async (tx) => {
      const tree = await tx.auditLog.tree(orgId)
      // A row queued twice (by hand, or a replay) is appended once: a repeat must not stall the queue.
      const seen = await tx.auditLog.leafed(queued.map((p) => p.eventId))
      const range = new CompactRange(tree?.size ?? 0, (tree?.edge ?? []).map((h) => Buffer.from(h, 'hex')))
      const leaves: LogLeaf[] = []
      for (const p of queued) {
        const row = p.row
        // A queued row that is gone (removed behind the database's back) has no leaf; verify names it.
        if (!row || row.org_id !== orgId || seen.has(p.eventId)) continue
        seen.add(p.eventId)
        const h = rowLeafHash(row)
        leaves.push({ idx: range.size, eventId: p.eventId, leafHash: h.toString('hex') })
        range.append(h)
      }
      const next: LogTree = { orgId, size: range.size, edge: range.edge.map((h) => h.toString('hex')), root: range.root().toString('hex'), updatedAt: nowIso() }
      if (leaves.length > 0) await tx.auditLog.append(tree, next, leaves)
      await tx.auditLog.dropPending(queued.map((p) => p.seq))
      return leaves.length
    })
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
