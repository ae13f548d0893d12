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
import { createReadStream } from 'node:fs'
import { mkdir, open, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import type { AuditEvent } from '../../contract/index.js'
import type { Store } from '../../store/index.js'
import { canonicalRow } from './canonical.js'
import { logId, logOrigin } from './log.js'
import { parseVerifierKey, type VerifierKey } from './note.js'
import type { LeafEntry, VerifyInput } from './verify.js'
import { checkpointFileName, readFiles, WitnessDir } from './witness.js'

export const BUNDLE_FORMAT = 'corral-audit-bundle/1'
const PAGE = 5_000

/** Every leaf of `orgId`'s tree with its row as stored now, page by page. */
export async function* databaseLeaves(store: Store, orgId: string): AsyncGenerator<LeafEntry> {
  for (let from = 0; ; from += PAGE) {
    const leaves = await store.auditLog.leaves(orgId, from, from + PAGE)
    if (leaves.length === 0) return
    const rows = await store.auditLog.rows(leaves.map((l) => l.eventId))
    for (const leaf of leaves) {
      const row = rows.get(leaf.eventId)
      yield row && row.org_id === orgId ? { leaf, row } : { leaf }
    }
    if (leaves.length < PAGE) return
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

async function* remoteLeaves(log: RemoteLog): AsyncGenerator<LeafEntry> {
  for (let from = 0; ; from += PAGE) {
    const page = await log.leaves(from, PAGE)
    for (const l of page) yield { leaf: { idx: l.index, eventId: l.id, leafHash: l.leaf_hash }, ...(l.row ? { row: l.row } : {}) }
    if (page.length < PAGE) return
  }
}

/** Verification input over the API. */
export async function remoteInput(log: RemoteLog, trust: TrustOptions): Promise<VerifyInput> {
  return {
    orgId: log.orgId, leaves: remoteLeaves(log), unlogged: await log.unlogged(), checkpoints: await log.checkpoints(),
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
export async function databaseInput(store: Store, orgId: string, trust: TrustOptions): Promise<VerifyInput> {
  const stored = await store.auditLog.checkpoints(orgId)
  const logKeys = (await store.auditLog.keys()).map((k) => k.vkey)
  return {
    orgId, leaves: databaseLeaves(store, orgId), unlogged: await store.auditLog.unlogged(orgId),
    checkpoints: stored.map((c) => c.note),
    ...(await trusted(trust, logKeys, orgId)),
  }
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
    orgId, leaves: bundleLeaves(dir), unlogged,
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

async function* bundleLeaves(dir: string): AsyncGenerator<LeafEntry> {
  const rows = lines(join(dir, 'rows.jsonl'))
  for await (const text of lines(join(dir, 'leaves.jsonl'))) {
    const l = JSON.parse(text) as { index: number; id: string; leaf_hash: string }
    const r = await rows.next()
    const line = r.done || r.value === 'null' ? undefined : r.value
    yield { leaf: { idx: l.index, eventId: l.id, leafHash: l.leaf_hash }, ...(line !== undefined ? { line } : {}) }
  }
}

async function* lines(path: string): AsyncGenerator<string> {
  const rl = createInterface({ input: createReadStream(path, 'utf8'), crlfDelay: Infinity })
  for await (const l of rl) if (l.length > 0) yield l
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
    for await (const { leaf, row } of databaseLeaves(store, orgId)) {
      rowText += `${row ? canonicalRow(row) : 'null'}\n`
      leafText += `${JSON.stringify({ index: leaf.idx, id: leaf.eventId, leaf_hash: leaf.leafHash })}\n`
      size++
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
