// One round of the appender: the queue's head (rows committed, in commit order) becomes leaves of
// each org's tree. Everything that costs CPU (each row's RFC 8785 bytes, the leaf and node
// hashes, the trees' new right edges) is computed before the transaction, from the trees as read;
// the transaction is three bulk statements and a conditional update per tree, so a replica that
// extended a tree meanwhile makes this round roll back whole (the caller reads the queue again).
import { nowIso } from '../../contract/index.js'
import { AppendConflictError, isUniqueViolation, QUEUE_COLUMNS, type LogLeaf, type LogTree, type Store } from '../../store/index.js'
import { rowEncoder } from './canonical.js'
import type { AppendPacer } from './pace.js'
import { CompactRange, hashLeaf, type Hash } from './tree.js'

export interface RoundResult {
  /** Queue entries read (0: the queue is empty). */
  taken: number
  /** Leaves added. */
  added: number
  /** Another replica moved a tree first: nothing of this round was stored. */
  conflict: boolean
  /** Ids of rows appended under an unreadable leaf (their stored content does not encode). */
  unreadable: string[]
}

export async function appendRound(store: Store, batch: number): Promise<RoundResult> {
  // Each row is encoded and hashed as it is read (none is kept); the leaves get their indexes once
  // the trees are read, in the queue's order.
  let seqs: number[] = []
  let orgIds = new Set<string>()
  let hashed: Array<{ orgId: string; eventId: string; hash: Hash }> = []
  let unreadable: string[] = []
  let seen = new Set<string>()
  let columns: readonly string[] = []
  let encode: (values: readonly unknown[]) => string = () => ''
  let orgColumn = -1
  await store.auditLog.pendingBatch(batch, {
    begin(names) {
      ;[seqs, orgIds, hashed, unreadable, seen] = [[], new Set(), [], [], new Set()]
      columns = names
      encode = rowEncoder(columns, QUEUE_COLUMNS)
      orgColumn = columns.indexOf('org_id')
    },
    entry(q) {
      seqs.push(q.seq)
      orgIds.add(q.orgId)
      // A queued row that is gone (removed behind the database's back) has no leaf, verify names it;
      // a row queued twice (by hand, or a replay) is appended once: a repeat must not stall the queue.
      if (!q.values || q.values[orgColumn] !== q.orgId || q.leafed || seen.has(q.eventId)) return
      seen.add(q.eventId)
      let bytes: string
      try {
        bytes = encode(q.values)
      } catch {
        bytes = unreadableLeaf(Object.fromEntries(columns.map((c, i) => [c, q.values![i]])))
        unreadable.push(q.eventId)
      }
      hashed.push({ orgId: q.orgId, eventId: q.eventId, hash: hashLeaf(bytes) })
    },
  })
  if (seqs.length === 0) return { taken: 0, added: 0, conflict: false, unreadable: [] }
  const stored = new Map((await store.auditLog.treesOf([...orgIds])).map((t) => [t.orgId, t]))
  const ranges = new Map<string, CompactRange>()
  const leaves: Array<LogLeaf & { orgId: string }> = []
  for (const { orgId, eventId, hash } of hashed) {
    let range = ranges.get(orgId)
    if (!range) {
      const t = stored.get(orgId)
      range = new CompactRange(t?.size ?? 0, (t?.edge ?? []).map((h) => Buffer.from(h, 'hex')))
      ranges.set(orgId, range)
    }
    leaves.push({ orgId, idx: range.size, eventId, leafHash: hash.toString('hex') })
    range.append(hash)
  }
  const updatedAt = nowIso()
  const trees = [...ranges].map(([orgId, range]) => ({
    from: stored.get(orgId),
    next: { orgId, size: range.size, edge: range.edge.map((h) => h.toString('hex')), root: range.root().toString('hex'), updatedAt } satisfies LogTree,
  }))
  try {
    await store.transaction((tx) => tx.auditLog.appendRound(trees, leaves, seqs))
  } catch (err) {
    if (err instanceof AppendConflictError || isUniqueViolation(err)) return { taken: seqs.length, added: 0, conflict: true, unreadable: [] }
    throw err
  }
  return { taken: seqs.length, added: leaves.length, conflict: false, unreadable }
}

/**
 * The leaf bytes of a row whose stored content does not encode: `unreadable ` and its columns' JSON
 * text as stored, so the leaf still commits to what the appender read. A row's encoding is a JSON
 * object (it starts with `{`), so no row, as stored or as exported, hashes to this leaf.
 */
export function unreadableLeaf(raw: Readonly<Record<string, unknown>>): string {
  const text = (v: unknown) => (typeof v === 'object' && !(v instanceof Uint8Array) ? JSON.stringify(v) : String(v))
  const columns = Object.fromEntries(Object.entries(raw).filter(([k, v]) => !QUEUE_COLUMNS.has(k) && v !== null && v !== undefined).map(([k, v]) => [k, text(v)]))
  return `unreadable ${JSON.stringify(columns)}`
}

export interface Drained {
  added: number
  unreadable: string[]
  /** The pacer held a round back (the writer has a backlog and the lag is within its bounds). */
  deferred?: boolean
}

/**
 * Rounds until the queue is empty, a replica conflicts (the next tick goes on), `stopped()`, or
 * the pacer holds the next round back (checked before each round, so a burst that starts mid-drain
 * has the lock and the cores back within one round). With a pacer and the lag within its bounds,
 * rounds are slices of `pacer.sliceRows` with a pause after each (pace.ts); past a bound, and
 * without a pacer (an on-demand checkpoint), rounds of `batch` run back to back.
 */
export async function drainQueue(store: Store, batch: number, stopped: () => boolean, pacer?: AppendPacer, admitted = false): Promise<Drained> {
  let added = 0
  const unreadable: string[] = []
  for (let round = 0; ; round++) {
    const overdue = pacer ? await pacer.overdue(store) : true
    // `admitted`: the caller's pacer let the first round through (a thread started for it has no lag clock yet).
    if (pacer && !overdue && !(admitted && round === 0) && pacer.busy()) return { added, unreadable, deferred: true }
    const size = overdue ? batch : Math.min(batch, pacer!.sliceRows)
    const began = performance.now()
    const r = await appendRound(store, size)
    added += r.added
    unreadable.push(...r.unreadable)
    if (r.taken < size || r.conflict || stopped()) return { added, unreadable }
    // Between rounds, let the event loop run; between slices, leave the core for the pause.
    const pause = overdue ? 0 : pacer!.pauseAfter(performance.now() - began)
    await new Promise((resolve) => (pause > 0 ? setTimeout(resolve, pause) : setImmediate(resolve)))
  }
}
