// Where verification reads a log from: the database (online), or an export directory written by
// `corral audit export --format bundle` (offline, no database). The bundle is plain files:
//   manifest.json        format, org id, origin prefix, tree size, when exported
//   rows.jsonl           line i: the canonical bytes of leaf i's row as stored (its leaf hash is
//                        SHA-256(0x00 || line)), or `null` when the database has no such row
//   leaves.jsonl         line i: {"index","id","leaf_hash"} as the database's tree records it
//   unlogged.jsonl       rows of the org in no leaf: {"pending": bool, "row": {…}}
//   checkpoints/<size>.checkpoint   the database's signed checkpoints
//   witness/<size>.checkpoint       the witness's copies, when the exporter could read the witness
//   keys/<name>.vkey     every public key the database knows
import { mkdir, open, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { AuditEvent } from '../../contract/index.js'
import { LEAF_COLUMNS, openLeafReader, type Store } from '../../store/index.js'
import { canonicalRow, storedRowBytes } from './canonical.js'
import { logId, logOrigin } from './log.js'
import { parseVerifierKey, type VerifierKey } from './note.js'
import { RANGE, type RangeResult } from './range-check.js'
import type { LeafEntry, VerifyInput } from './verify.js'
import { runRanges } from './verify-pool.js'
import type { VerifyJob } from './verify-worker.js'
import { checkpointFileName, readFiles, WitnessDir } from './witness.js'

export const BUNDLE_FORMAT = 'corral-audit-bundle/1'
const READ_BLOCK = 8 << 20
const LF = 10
const CR = 13
const PAGE = 5_000
/** Leaves per database read while verifying. */
const DB_PAGE = 10_000

/**
 * Every leaf of `orgId`'s tree with its row as stored now, page by page (one read each, joining
 * the leaves with the rows; the next page is read while the caller works on this one).
 */
export async function* databaseLeaves(store: Store, orgId: string): AsyncGenerator<LeafEntry[]> {
  const read = (from: number) => store.auditLog.leafRows(orgId, from, DB_PAGE)
  let pending = read(0)
  for (;;) {
    const rows = await pending
    if (rows.length === 0) return
    pending = read(Number(rows[rows.length - 1].l_idx) + 1)
    // Not awaited until the next turn: a failure there is the next turn's.
    pending.catch(() => {})
    yield rows.map((r) => {
      const leaf = { idx: Number(r.l_idx), eventId: String(r.l_event_id), leafHash: String(r.l_leaf_hash) }
      return r.id !== null && r.id !== undefined && r.org_id === orgId ? { leaf, raw: r } : { leaf }
    })
    if (rows.length < DB_PAGE) return
  }
}

/** The log as the API serves it (GET /v1/audit/log, …/unlogged, /audit/checkpoints): what `corral audit verify` reads online. */
export interface RemoteLog {
  orgId: string
  /** Up to `limit` leaves from index `from`, each with its row as stored now (null when gone). */
  leaves(from: number, limit: number): Promise<Array<{ index: number; id: string; leaf_hash: string; row: AuditEvent | null }>>
  unlogged(): Promise<Array<{ row: AuditEvent; pending: boolean }>>
  checkpoints(): Promise<string[]>
  keys(): Promise<string[]>
}

async function* remoteLeaves(log: RemoteLog): AsyncGenerator<LeafEntry[]> {
  for (let from = 0; ; from += PAGE) {
    const page = await log.leaves(from, PAGE)
    yield page.map((l) => ({ leaf: { idx: l.index, eventId: l.id, leafHash: l.leaf_hash }, ...(l.row ? { row: l.row } : {}) }))
    if (page.length < PAGE) return
  }
}

/** Verification input over the API. */
export async function remoteInput(log: RemoteLog, trust: TrustOptions): Promise<VerifyInput> {
  return {
    orgId: log.orgId, leaves: remoteLeaves(log), unlogged: () => log.unlogged(), checkpoints: await log.checkpoints(),
    ...(await trusted(trust, await log.keys(), log.orgId)),
  }
}

export interface TrustOptions {
  /** The witness directory (checkpoints and keys/ published by serve). */
  witness?: string
  /** Verifier keys the auditor names (`<name>+<hash>+<key>` text). */
  keys?: readonly string[]
}

/** Verification input over the database. */
export async function databaseInput(store: Store, orgId: string, trust: TrustOptions, opts: { thread?: { url: string; schema?: string } } = {}): Promise<VerifyInput> {
  const stored = await store.auditLog.checkpoints(orgId)
  const logKeys = (await store.auditLog.keys()).map((k) => k.vkey)
  // A memory database cannot be opened by another thread: its leaves are checked on this one.
  const thread = opts.thread && !opts.thread.url.includes(':memory:') ? opts.thread : undefined
  return {
    orgId,
    ...(thread ? { ranges: (anchors: readonly number[]) => databaseRanges(thread, orgId, anchors) } : { leaves: databaseLeaves(store, orgId) }),
    // Every row of the org under a distinct leaf: none is unlogged, without looking each one up.
    unlogged: async ({ present, distinct }) => (distinct && (await store.auditLog.countRows(orgId)) === present ? [] : store.auditLog.unlogged(orgId)),
    checkpoints: stored.map((c) => c.note),
    ...(await trusted(trust, logKeys, orgId)),
  }
}

/**
 * The org's leaves cut into ranges of RANGE positions for the verification threads. A log whose
 * indexes run 0..n-1 is cut by index (and read up to the n leaves it had when verification began);
 * one with gaps is cut at the indexes found at every RANGE-th position.
 */
async function* databaseRanges(thread: { url: string; schema?: string }, orgId: string, anchors: readonly number[]): AsyncGenerator<RangeResult> {
  const reader = await openLeafReader(thread.url, thread.schema ? { schema: thread.schema } : {})
  let cuts: number[]
  let end: number
  try {
    const span = await reader.span(orgId)
    if (span.count === 0) return
    if (span.min === 0 && span.max === span.count - 1) {
      cuts = []
      for (let at = 0; at < span.count; at += RANGE) cuts.push(at)
      end = span.count
    } else {
      const idx = await reader.indexes(orgId)
      cuts = idx.filter((_, i) => i % RANGE === 0)
      end = idx[idx.length - 1] + 1
    }
  } finally {
    await reader.close()
  }
  const jobs = cuts.map((fromIdx, i) => {
    const from = i * RANGE
    return { kind: 'db' as const, orgId, from, fromIdx, toIdx: cuts[i + 1] ?? end, anchors: anchors.filter((a) => a > from && a <= from + RANGE) }
  })
  yield* runRanges(thread, jobs)
}

/** Verification input over an export directory; `trust.witness` defaults to the bundle's witness copies. */
export async function bundleInput(dir: string, trust: TrustOptions): Promise<VerifyInput> {
  const manifest = JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8')) as { format?: string; org_id?: string }
  if (manifest.format !== BUNDLE_FORMAT || typeof manifest.org_id !== 'string') throw new Error(`${dir} is not a corral audit bundle (manifest.json format ${BUNDLE_FORMAT})`)
  const orgId = manifest.org_id
  const unlogged = (await readLines(join(dir, 'unlogged.jsonl'))).map((l) => JSON.parse(l) as { row: AuditEvent; pending: boolean })
  const t = await trusted({ ...trust, witness: trust.witness }, await readFiles(join(dir, 'keys'), '.vkey'), orgId)
  const bundled = await readFiles(join(dir, 'witness'), '.checkpoint')
  return {
    orgId, ranges: (anchors) => runRanges({}, bundleJobs(dir, anchors)), unlogged: async () => unlogged,
    checkpoints: await readFiles(join(dir, 'checkpoints'), '.checkpoint'),
    ...t,
    witness: t.witness ?? (bundled.length > 0 ? bundled : undefined),
  }
}

async function trusted(trust: TrustOptions, logKeys: readonly string[], orgId: string): Promise<Pick<VerifyInput, 'keys' | 'keysSource' | 'witness'>> {
  const w = trust.witness ? new WitnessDir(trust.witness) : undefined
  const named = [...(trust.keys ?? []), ...(w ? await w.keys() : [])]
  const parse = (texts: readonly string[]): VerifierKey[] => texts.map((t) => parseVerifierKey(t)).filter((k): k is VerifierKey => k !== undefined)
  const keys = named.length > 0 ? parse(named) : parse(logKeys)
  return { keys, keysSource: named.length > 0 ? 'trusted' : 'log', ...(w ? { witness: await w.checkpoints(orgId) } : {}) }
}

/** The bundle's leaves and rows files in step, RANGE lines at a time, as the verification threads' jobs. */
async function* bundleJobs(dir: string, anchors: readonly number[]): AsyncGenerator<Extract<VerifyJob, { kind: 'bundle' }> extends infer J ? Omit<J, 'id'> : never> {
  const rows = lineBlocks(join(dir, 'rows.jsonl'), 1)
  try {
    let from = 0
    for await (const leaves of lineBlocks(join(dir, 'leaves.jsonl'), 0)) {
      const r = await rows.next()
      yield { kind: 'bundle', from, leaves, rows: r.done ? new Uint8Array(1) : r.value, anchors: anchors.filter((a) => a > from && a <= from + RANGE) }
      from += RANGE
    }
  } finally {
    await rows.return(undefined)
  }
}

/**
 * A file's bytes in blocks of RANGE non-empty lines (LF or CRLF; fewer in the last block), each
 * block a buffer of its own (handed to a thread) with `spare` zero bytes before it.
 */
async function* lineBlocks(path: string, spare: number): AsyncGenerator<Uint8Array> {
  const file = await open(path, 'r').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined
    throw err
  })
  if (!file) return
  try {
    let pending: Buffer[] = []
    let lines = 0
    const cut = (): Uint8Array => {
      const block = Buffer.concat([Buffer.alloc(spare), ...pending])
      pending = []
      lines = 0
      return new Uint8Array(block.buffer, block.byteOffset, block.byteLength)
    }
    // The line being read: its bytes so far in earlier chunks, and its last byte (CR before LF is no content).
    let carried = 0
    let carriedLast = -1
    for (;;) {
      const chunk = Buffer.allocUnsafe(READ_BLOCK)
      const { bytesRead } = await file.read(chunk, 0, READ_BLOCK)
      if (bytesRead === 0) break
      const buf = chunk.subarray(0, bytesRead)
      let from = 0
      let start = 0
      for (let nl = buf.indexOf(LF); nl !== -1; nl = buf.indexOf(LF, nl + 1)) {
        const last = nl > start ? buf[nl - 1] : carriedLast
        if (carried + nl - start - (last === CR ? 1 : 0) > 0) lines++
        carried = 0
        start = nl + 1
        if (lines === RANGE) {
          pending.push(buf.subarray(from, start))
          from = start
          yield cut()
        }
      }
      if (bytesRead > start) {
        carried += bytesRead - start
        carriedLast = buf[bytesRead - 1]
      }
      if (from < bytesRead) pending.push(buf.subarray(from))
    }
    if (pending.length > 0) yield cut()
  } finally {
    await file.close()
  }
}

async function readLines(path: string): Promise<string[]> {
  try {
    return (await readFile(path, 'utf8')).split('\n').filter((l) => l.length > 0)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw err
  }
}

/** Writes `orgId`'s log as a bundle into `dir` (created); returns the tree size written. */
export async function writeBundle(store: Store, orgId: string, dir: string, opts: { witness?: string } = {}): Promise<{ treeSize: number; checkpoints: number }> {
  await mkdir(join(dir, 'checkpoints'), { recursive: true })
  await mkdir(join(dir, 'keys'), { recursive: true })
  const rows = await open(join(dir, 'rows.jsonl'), 'w')
  const leaves = await open(join(dir, 'leaves.jsonl'), 'w')
  let size = 0
  try {
    let rowText = ''
    let leafText = ''
    for await (const page of databaseLeaves(store, orgId)) {
      for (const { leaf, raw } of page) {
        rowText += `${raw ? exportedBytes(raw) : 'null'}\n`
        leafText += `${JSON.stringify({ index: leaf.idx, id: leaf.eventId, leaf_hash: leaf.leafHash })}\n`
        size++
      }
      if (rowText.length > 1 << 20) {
        await rows.write(rowText)
        await leaves.write(leafText)
        rowText = leafText = ''
      }
    }
    await rows.write(rowText)
    await leaves.write(leafText)
  } finally {
    await rows.close()
    await leaves.close()
  }
  const unlogged = await store.auditLog.unlogged(orgId)
  await writeFile(join(dir, 'unlogged.jsonl'), unlogged.map((u) => `${JSON.stringify({ pending: u.pending, row: JSON.parse(canonicalRow(u.row)) as unknown })}\n`).join(''))
  const cps = await store.auditLog.checkpoints(orgId)
  for (const c of cps) await writeFile(join(dir, 'checkpoints', checkpointFileName(c.size)), c.note)
  for (const k of await store.auditLog.keys()) await writeFile(join(dir, 'keys', `${k.name}.vkey`), `${k.vkey}\n`)
  if (opts.witness) {
    await mkdir(join(dir, 'witness'), { recursive: true })
    const w = new WitnessDir(opts.witness)
    for (const note of await w.checkpoints(orgId)) {
      const size = Number(note.split('\n')[1])
      if (Number.isSafeInteger(size)) await writeFile(join(dir, 'witness', checkpointFileName(size)), note)
    }
    for (const vkey of await w.keys()) {
      const k = parseVerifierKey(vkey)
      if (k) await writeFile(join(dir, 'keys', `${k.name}.vkey`), `${k.vkey}\n`)
    }
  }
  const origin = logOrigin(await logId(store), orgId)
  await writeFile(join(dir, 'manifest.json'), `${JSON.stringify({ format: BUNDLE_FORMAT, org_id: orgId, origin, tree_size: size, checkpoints: cps.length, exported_at: new Date().toISOString() }, null, 2)}\n`)
  return { treeSize: size, checkpoints: cps.length }
}

/** A row's leaf bytes for rows.jsonl; a row whose columns cannot be read as stored is written as its columns' text (it verifies as changed). */
function exportedBytes(raw: Readonly<Record<string, unknown>>): string {
  try {
    return storedRowBytes(raw, LEAF_COLUMNS)
  } catch {
    return JSON.stringify(Object.fromEntries(Object.entries(raw).filter(([k, v]) => !LEAF_COLUMNS.has(k) && k !== 'ts' && v !== null)))
  }
}
