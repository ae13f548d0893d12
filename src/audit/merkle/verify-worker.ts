// A verification thread (verify-pool.ts): checks ranges of a log on its own, reading them from the
// database with a read-only connection of its own, or from blocks of an export's files the main
// thread hands over. Every row is encoded from its stored values (or taken as the export's bytes)
// and hashed here; only a range's summary goes back.
import { hash } from 'node:crypto'
import { parentPort, workerData } from 'node:worker_threads'
import { LEAF_COLUMNS, LEAF_READ_COLUMNS, openLeafReader, type LeafReader } from '../../store/index.js'
import { rowEncoder } from './canonical.js'
import { RangeChecker, type RangeResult } from './range-check.js'

export interface VerifyWorkerData { url?: string; schema?: string }
export type VerifyJob =
  | { id: number; kind: 'db'; orgId: string; from: number; fromIdx: number; toIdx: number; anchors: number[] }
  /** `leaves`, `rows`: whole non-empty lines of the two files, `rows` after one spare byte. */
  | { id: number; kind: 'bundle'; from: number; leaves: Uint8Array; rows: Uint8Array; anchors: number[] }
export type VerifyReply = { id: number; result: RangeResult } | { id: number; error: string } | { ready: true } | { failed: string }

const port = parentPort!
const data = workerData as VerifyWorkerData
let chain: Promise<unknown> = Promise.resolve()

try {
  const reader = data.url ? await openLeafReader(data.url, data.schema ? { schema: data.schema } : {}) : undefined
  port.on('message', (job: VerifyJob | { kind: 'close' }) => {
    if (job.kind === 'close') {
      void chain.then(() => reader?.close()).finally(() => port.close())
      return
    }
    chain = chain.then(async () => {
      try {
        const result = job.kind === 'db' ? await checkDb(reader!, job) : checkBundle(job)
        port.postMessage({ id: job.id, result } satisfies VerifyReply, [result.fingerprints.buffer as ArrayBuffer])
      } catch (err) {
        port.postMessage({ id: job.id, error: String((err as Error)?.message ?? err) } satisfies VerifyReply)
      }
    })
  })
  port.postMessage({ ready: true } satisfies VerifyReply)
} catch (err) {
  port.postMessage({ failed: String((err as Error)?.message ?? err) } satisfies VerifyReply)
}

let encoderKey = ''
let encode: (values: readonly unknown[]) => string = () => ''

/** Each row is encoded and hashed as the reader hands it over: a range's rows are never held. */
async function checkDb(reader: LeafReader, job: Extract<VerifyJob, { kind: 'db' }>): Promise<RangeResult> {
  let checker = new RangeChecker(job.from, job.anchors)
  let idAt = -1
  let orgAt = -1
  await reader.range(job.orgId, job.fromIdx, job.toIdx, {
    begin(columns) {
      const key = columns.join(',')
      if (key !== encoderKey) {
        encoderKey = key
        encode = rowEncoder(columns, LEAF_COLUMNS)
      }
      idAt = columns.indexOf('id', LEAF_READ_COLUMNS)
      orgAt = columns.indexOf('org_id', LEAF_READ_COLUMNS)
      // A read that starts over starts the range over.
      checker = new RangeChecker(job.from, job.anchors)
    },
    row(r) {
      const idx = Number(r[0])
      const id = String(r[1])
      const stored = String(r[2])
      let bytes: string | null | undefined
      if (r[idAt] !== null && r[idAt] !== undefined && r[orgAt] === job.orgId) {
        try {
          bytes = encode(r)
        } catch {
          // A column that cannot be read as stored (JSON edited into something that is not): the row was changed.
          bytes = null
        }
      }
      const computed = bytes === undefined ? undefined : bytes === null ? '' : hash('sha256', `\0${bytes}`, 'hex')
      if (checker.add(idx, id, stored, computed)) checker.mismatch(idx, id, computed!, stored, bytes ?? null)
    },
  })
  return checker.finish()
}

const NUL = 0
const LF = 10
const CR = 13

/** Leaf line i of the block goes with row line i; a missing row line, or `null`, is a removed row. */
function checkBundle(job: Extract<VerifyJob, { kind: 'bundle' }>): RangeResult {
  const leaves = Buffer.from(job.leaves.buffer, job.leaves.byteOffset, job.leaves.byteLength).toString('utf8').split('\n')
  const rows = Buffer.from(job.rows.buffer, job.rows.byteOffset, job.rows.byteLength)
  const checker = new RangeChecker(job.from, job.anchors)
  let at = 1
  for (let line of leaves) {
    if (line.endsWith('\r')) line = line.slice(0, -1)
    if (line.length === 0) continue
    const l = leafLine(line)
    // The row line that goes with it: the next non-empty one (CR before LF left out, as in the leaves).
    let start = -1
    let end = -1
    while (at < rows.length) {
      let nl = rows.indexOf(LF, at)
      if (nl === -1) nl = rows.length
      const s = at
      const e = nl > s && rows[nl - 1] === CR ? nl - 1 : nl
      at = nl + 1
      if (e > s) {
        start = s
        end = e
        break
      }
    }
    let computed: string | undefined
    if (start >= 0 && !(end - start === 4 && rows.toString('latin1', start, end) === 'null')) {
      // The leaf hash of the line's bytes as they are in the file: SHA-256(0x00 || line), the byte
      // before the line (a newline, or the block's spare first byte) set to 0x00 meanwhile.
      const before = rows[start - 1]
      rows[start - 1] = NUL
      computed = hash('sha256', rows.subarray(start - 1, end), 'hex')
      rows[start - 1] = before
    }
    if (checker.add(l.index, l.id, l.leaf_hash, computed)) checker.mismatch(l.index, l.id, computed!, l.leaf_hash, rows.toString('utf8', start, end))
  }
  return checker.finish()
}

function leafLine(line: string): { index: number; id: string; leaf_hash: string } {
  const l = JSON.parse(line) as { index?: unknown; id?: unknown; leaf_hash?: unknown }
  if (typeof l?.index !== 'number' || typeof l.id !== 'string' || typeof l.leaf_hash !== 'string') throw new Error(`leaves.jsonl: not a leaf: ${line.slice(0, 200)}`)
  return { index: l.index, id: l.id, leaf_hash: l.leaf_hash }
}
