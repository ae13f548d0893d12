// Verification of one org's log: every checkpoint's signature, the witness's copies against the
// database's, the stored tree against every checkpoint, and every row against its leaf. Findings
// name exactly what differs: a row changed, removed or inserted, rows reordered, the tail cut, a
// checkpoint the database lost or contradicts. The source is the database or an export directory
// (sources.ts); this file only reads what it is handed, leaf by leaf, so a million rows stream.
import type { AuditEvent } from '../../contract/index.js'
import { LEAF_COLUMNS, type LogLeaf } from '../../store/index.js'
import { canonicalRow, storedRowBytes } from './canonical.js'
import { openCheckpoint, type VerifierKey } from './note.js'
import { RANGE, RangeChecker, unpackEdge, type RangeResult } from './range-check.js'
import { CompactRange, hashLeaf, hashLeafHex } from './tree.js'

export type FindingKind =
  | 'changed' | 'removed' | 'inserted' | 'reordered' | 'truncated' | 'tree_mismatch' | 'leaf_gap'
  | 'checkpoint_missing' | 'checkpoint_mismatch' | 'checkpoint_invalid' | 'fork' | 'no_checkpoint'
  | 'pending' | 'unanchored_tail' | 'no_witness' | 'keys_from_log'

export interface Finding {
  kind: FindingKind
  /** false: a note that does not fail verification. */
  error: boolean
  message: string
  index?: number
  id?: string
  size?: number
}

export interface LeafEntry {
  leaf: LogLeaf
  /**
   * The leaf's row as stored now, one of: `raw` as the database driver returned it (with
   * LEAF_COLUMNS beside it), `row` as the API returns it, `line` its bytes in an export. None when
   * the row is gone. Whichever it is, the row's content is encoded and hashed here: a stored hash
   * is never taken for the row.
   */
  raw?: Readonly<Record<string, unknown>>
  row?: AuditEvent
  line?: string
}

/** What the walk over the leaves saw, for a source that can answer `unlogged` cheaply from it. */
export interface LeafTally {
  /** Leaves whose row is there. */
  present: number
  /** No two leaves named the same row. */
  distinct: boolean
}

export interface VerifyInput {
  orgId: string
  /** The leaves in index order, page by page (checked on this thread)… */
  leaves?: AsyncIterable<readonly LeafEntry[]>
  /** …or the log already checked range by range, in order (worker threads); given the checkpoint sizes to record roots at. */
  ranges?: (anchors: readonly number[]) => AsyncIterable<RangeResult>
  /** The org's rows in no leaf, asked after the walk. */
  unlogged: (tally: LeafTally) => Promise<ReadonlyArray<{ row: AuditEvent; pending: boolean }>>
  /** Checkpoint notes the log holds (database or export). */
  checkpoints: readonly string[]
  /** Checkpoint notes from the witness; undefined when none was given. */
  witness?: readonly string[]
  keys: readonly VerifierKey[]
  /** 'trusted': keys from the witness or named by the auditor; 'log': only the log's own. */
  keysSource: 'trusted' | 'log'
}

export interface VerifyReport {
  org_id: string
  ok: boolean
  tree_size: number
  checkpoints_verified: number
  latest_checkpoint?: number
  findings: Finding[]
}

interface Anchor { size: number; root: Buffer; from: 'log' | 'witness' }
interface Mismatch { index: number; id: string; computed: string; stored: string; row: AuditEvent | undefined }

const MAX_PERMUTATION_CHECKS = 256
/** Beyond this many leaves the walk stops proving ids distinct and the source answers `unlogged` the long way. */
const MAX_TRACKED_IDS = 10_000_000

export async function verifyLog(input: VerifyInput): Promise<VerifyReport> {
  const findings: Finding[] = []
  const add = (f: Finding) => findings.push(f)
  const anchors = collectAnchors(input, add)
  const sizes = [...anchors.keys()].sort((a, b) => a - b)

  const range = new CompactRange()
  const removed: Array<{ index: number; id: string }> = []
  const mismatched: Mismatch[] = []
  let matchedUpTo = 0
  let firstBadAnchor: number | undefined
  let prevIdx: number | undefined
  let gap = false
  let present = 0
  // Rows named by two leaves would let a duplicate stand in for a row inserted behind the log:
  // every present leaf's id fingerprint, sorted at the end, shows them distinct.
  let prints: Float64Array = new Float64Array(0)
  let distinct = true
  for await (const r of input.ranges ? input.ranges(sizes) : checkEntries(input.leaves ?? [], sizes)) {
    if (r.count === 0) continue
    if (!gap) {
      const expected = prevIdx === undefined ? 0 : prevIdx + 1
      const missing = r.firstIdx !== expected ? { expected, found: r.firstIdx } : r.gap
      if (missing) {
        gap = true
        add({ kind: 'leaf_gap', error: true, index: missing.expected, message: `leaf ${missing.expected} is missing from the stored tree (the next stored leaf is ${missing.found}): the leaf table was edited` })
      }
    }
    prevIdx = r.lastIdx
    if (distinct && present + r.present > MAX_TRACKED_IDS) distinct = false
    else if (distinct) prints = appendPrints(prints, present, r.fingerprints)
    present += r.present
    for (const x of r.removed) removed.push(x)
    for (const m of r.mismatched) mismatched.push({ index: m.index, id: m.id, computed: m.computed, stored: m.stored, row: m.bytes === null ? undefined : (m.row ?? parseRow(m.bytes)) })
    for (const a of r.anchors) {
      const t = range.clone()
      t.extend(a.size - r.from, unpackEdge(a.edge))
      if (t.root().equals(anchors.get(a.size)!.root)) matchedUpTo = a.size
      else firstBadAnchor ??= a.size
    }
    range.extend(r.count, unpackEdge(r.edge))
  }
  if (distinct) {
    const sorted = prints.subarray(0, present).sort()
    for (let i = 1; i < sorted.length && distinct; i++) if (sorted[i] === sorted[i - 1]) distinct = false
  }
  const size = range.size

  if (firstBadAnchor !== undefined) {
    add({ kind: 'tree_mismatch', error: true, size: firstBadAnchor, message: `the stored tree does not match the signed checkpoint of size ${firstBadAnchor}: leaves ${matchedUpTo}..${firstBadAnchor - 1} were rewritten, inserted or reordered in the leaf table (or the log was replaced)` })
  }
  const beyond = sizes.filter((s) => s > size)
  if (beyond.length > 0) {
    const top = beyond[beyond.length - 1]
    add({ kind: 'truncated', error: true, size: top, message: `tail truncated: the log has ${size} leaves, but a checkpoint of size ${top} was signed${anchors.get(top)!.from === 'witness' ? ' and published to the witness' : ''}; leaves ${size}..${top - 1} are gone` })
  }
  reportRemoved(removed, size, add)
  reportMismatches(mismatched, add)
  const unlogged = await input.unlogged({ present, distinct })
  for (const u of unlogged) {
    if (u.pending) continue
    add({ kind: 'inserted', error: true, id: u.row.id, message: `row ${u.row.id} (${u.row.timestamp} ${u.row.event_type}) is in no leaf and was never queued for the log: inserted behind the log's back` })
  }
  const waiting = unlogged.filter((u) => u.pending).length
  if (waiting > 0) add({ kind: 'pending', error: false, message: `${waiting} row(s) committed but not yet appended to the tree (the appender adds them within seconds)` })
  const latest = sizes.length > 0 ? sizes[sizes.length - 1] : undefined
  if (latest === undefined && size > 0) add({ kind: 'no_checkpoint', error: true, message: `no signed checkpoint verifies: none of the ${size} leaves is proven` })
  else if (latest !== undefined && size > latest) add({ kind: 'unanchored_tail', error: false, message: `leaves ${latest}..${size - 1} are not covered by a signed checkpoint yet` })

  return {
    org_id: input.orgId, ok: !findings.some((f) => f.error), tree_size: size,
    checkpoints_verified: sizes.filter((s) => s <= size && s <= matchedUpTo).length,
    ...(latest !== undefined ? { latest_checkpoint: latest } : {}),
    findings,
  }
}

/** The signed checkpoints both sources agree on, by size; disagreements and bad signatures are findings. */
function collectAnchors(input: VerifyInput, add: (f: Finding) => void): Map<number, Anchor> {
  const anchors = new Map<number, Anchor>()
  const suffix = `/${input.orgId}`
  const open = (note: string, from: Anchor['from']): Anchor | undefined => {
    const r = openCheckpoint(note, input.keys)
    const where = from === 'witness' ? 'the witness' : 'the log'
    if (!r.ok) {
      add({ kind: 'checkpoint_invalid', error: true, ...(r.checkpoint ? { size: r.checkpoint.size } : {}), message: `a checkpoint in ${where}${r.checkpoint ? ` (size ${r.checkpoint.size})` : ''} does not verify: ${r.problem}` })
      return undefined
    }
    if (!r.checkpoint.origin.endsWith(suffix)) {
      add({ kind: 'checkpoint_invalid', error: true, size: r.checkpoint.size, message: `a checkpoint in ${where} (size ${r.checkpoint.size}) is of another log: ${r.checkpoint.origin}` })
      return undefined
    }
    return { size: r.checkpoint.size, root: r.checkpoint.root, from }
  }
  for (const note of input.checkpoints) {
    const a = open(note, 'log')
    if (!a) continue
    const seen = anchors.get(a.size)
    if (seen && !seen.root.equals(a.root)) add({ kind: 'fork', error: true, size: a.size, message: `two signed checkpoints of size ${a.size} with different roots in the log: a fork` })
    else anchors.set(a.size, a)
  }
  if (input.witness === undefined) {
    add({ kind: 'no_witness', error: false, message: 'no witness given: the log is checked against its own checkpoints only (a rewrite that also replaced them is not caught)' })
  } else {
    for (const note of input.witness) {
      const w = open(note, 'witness')
      if (!w) continue
      const inLog = anchors.get(w.size)
      if (!inLog) add({ kind: 'checkpoint_missing', error: true, size: w.size, message: `the witness holds checkpoint ${w.size} (root ${w.root.toString('hex').slice(0, 16)}…) that the log does not: the log's checkpoints were removed or replaced` })
      else if (!inLog.root.equals(w.root)) add({ kind: 'checkpoint_mismatch', error: true, size: w.size, message: `checkpoint ${w.size} in the log has another root than the one published to the witness: the log was replaced` })
      anchors.set(w.size, w)
    }
  }
  if (input.keysSource === 'log') add({ kind: 'keys_from_log', error: false, message: 'public keys taken from the log itself: signatures prove consistency, not who signed (pass --key or a witness with keys/)' })
  return anchors
}

function reportRemoved(removed: ReadonlyArray<{ index: number; id: string }>, size: number, add: (f: Finding) => void): void {
  let tail = removed.length
  while (tail > 0 && removed[tail - 1].index === size - (removed.length - tail) - 1) tail--
  const tailCount = removed.length - tail
  for (const r of removed.slice(0, tail)) add({ kind: 'removed', error: true, index: r.index, id: r.id, message: `row ${r.id} (leaf ${r.index}) was removed` })
  if (tailCount > 0) {
    const from = size - tailCount
    add({ kind: 'truncated', error: true, index: from, message: `tail truncated: the last ${tailCount} row(s) (leaves ${from}..${size - 1}, ${removed[tail].id}…${removed[removed.length - 1].id}) were removed` })
  }
}

function reportMismatches(mismatched: readonly Mismatch[], add: (f: Finding) => void): void {
  const byStored = new Map(mismatched.map((m) => [m.stored, m]))
  const explained = new Set<Mismatch>()
  for (const m of mismatched) {
    // The row under this id is what another leaf committed: rows (or the leaf table's ids) were swapped.
    const other = byStored.get(m.computed) ?? permuted(m, mismatched)
    if (other && other !== m) {
      explained.add(m)
      add({ kind: 'reordered', error: true, index: m.index, id: m.id, message: `reordered: leaf ${m.index} is row ${m.id}, but what is stored under that id is what leaf ${other.index} (row ${other.id}) committed` })
    }
  }
  for (const m of mismatched) {
    if (explained.has(m)) continue
    add({ kind: 'changed', error: true, index: m.index, id: m.id, message: `row ${m.id} (leaf ${m.index}) was changed after it was appended` })
  }
}

/** The mismatched leaf whose committed row this one's content is, under that leaf's id (ids permuted). */
function permuted(m: Mismatch, all: readonly Mismatch[]): Mismatch | undefined {
  if (!m.row || all.length > MAX_PERMUTATION_CHECKS) return undefined
  for (const o of all) {
    if (o === m) continue
    if (hashLeaf(canonicalRow({ ...m.row, id: o.id })).toString('hex') === o.stored) return o
  }
  return undefined
}

/** Leaves handed over page by page, checked here in ranges as the worker threads check theirs. */
async function* checkEntries(leaves: AsyncIterable<readonly LeafEntry[]> | Iterable<readonly LeafEntry[]>, anchors: readonly number[]): AsyncGenerator<RangeResult> {
  let pos = 0
  let checker = new RangeChecker(0, anchors)
  for await (const page of leaves) {
    for (const { leaf, raw, row, line } of page) {
      if (checker.count === RANGE) {
        yield checker.finish()
        checker = new RangeChecker(pos, anchors)
      }
      const bytes = line ?? (raw ? encodeOrNull(raw) : row ? canonicalRow(row) : undefined)
      const computed = bytes === undefined ? undefined : bytes === null ? '' : hashLeafHex(bytes)
      if (checker.add(leaf.idx, leaf.eventId, leaf.leafHash, computed)) checker.mismatch(leaf.idx, leaf.eventId, computed!, leaf.leafHash, bytes ?? null, row)
      pos++
    }
  }
  yield checker.finish()
}

function appendPrints(into: Float64Array, used: number, more: Float64Array): Float64Array {
  let out = into
  if (used + more.length > into.length) {
    out = new Float64Array(Math.max(used + more.length, into.length * 2))
    out.set(into.subarray(0, used))
  }
  out.set(more, used)
  return out
}

/** A stored row's leaf bytes; null when a column cannot be read (JSON edited into something that is not): the row was changed. */
function encodeOrNull(raw: Readonly<Record<string, unknown>>): string | null {
  try {
    return storedRowBytes(raw, LEAF_COLUMNS)
  } catch {
    return null
  }
}

function parseRow(bytes: string): AuditEvent | undefined {
  try {
    return JSON.parse(bytes) as AuditEvent
  } catch {
    return undefined
  }
}
