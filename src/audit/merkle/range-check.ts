// One range of a log's leaves checked on its own (on a worker thread, or in-process): every row
// encoded and hashed against its leaf, the range's own Merkle subtrees built from the stored leaf
// hashes, and what verification needs of it kept small. Ranges start at a multiple of RANGE
// leaves and hold at most RANGE, so each one's subtrees are subtrees of the whole tree: the
// verifier appends them in order (CompactRange.extend), and for a checkpoint that ends inside a
// range takes the range's edge at that size.
import type { AuditEvent } from '../../contract/index.js'
import { CompactRange } from './tree.js'

/** Leaves per range: a power of two. */
export const RANGE = 1 << 14

export interface RangeMismatch {
  index: number
  id: string
  /** The leaf hash of the row as stored now ('' when a column could not be read). */
  computed: string
  stored: string
  /** The row's leaf bytes (null when a column could not be read). */
  bytes: string | null
  row?: AuditEvent
}

export interface RangeResult {
  /** The position of the range's first leaf in the log. */
  from: number
  count: number
  firstIdx?: number
  lastIdx?: number
  /** The first leaf inside the range whose index does not follow the one before. */
  gap?: { expected: number; found: number }
  /** Leaves whose row is there. */
  present: number
  /** A 53-bit fingerprint of each present leaf's id (equal ids, equal fingerprints). */
  fingerprints: Float64Array
  removed: Array<{ index: number; id: string }>
  mismatched: RangeMismatch[]
  /** The range's compact edge: one 32-byte root per set bit of `count`, largest first. */
  edge: Uint8Array
  /** The edge at each checkpoint size inside the range (`size` counts from the log's start). */
  anchors: Array<{ size: number; edge: Uint8Array }>
}

export class RangeChecker {
  readonly #from: number
  readonly #anchors: readonly number[]
  #anchorAt = 0
  readonly #tree = new CompactRange()
  #fingerprints = new Float64Array(RANGE)
  #present = 0
  #firstIdx: number | undefined
  #prevIdx: number | undefined
  #gap: RangeResult['gap']
  readonly #removed: RangeResult['removed'] = []
  readonly #mismatched: RangeMismatch[] = []
  readonly #anchorEdges: RangeResult['anchors'] = []

  /** `anchors`: checkpoint sizes, ascending; those in (from, from + RANGE] are recorded. */
  constructor(from: number, anchors: readonly number[]) {
    this.#from = from
    this.#anchors = anchors.filter((a) => a > from && a <= from + RANGE)
  }

  get count(): number {
    return this.#tree.size
  }

  /**
   * One leaf: its stored index, id and hash, and the hash of its row as stored now (undefined:
   * no row). Returns true when the row does not match its leaf (the caller adds it with `mismatch`).
   */
  add(idx: number, id: string, stored: string, computed: string | undefined): boolean {
    if (this.#prevIdx === undefined) this.#firstIdx = idx
    else if (!this.#gap && idx !== this.#prevIdx + 1) this.#gap = { expected: this.#prevIdx + 1, found: idx }
    this.#prevIdx = idx
    let bad = false
    if (computed === undefined) this.#removed.push({ index: idx, id })
    else {
      if (this.#present === this.#fingerprints.length) {
        const grown = new Float64Array(this.#present * 2)
        grown.set(this.#fingerprints)
        this.#fingerprints = grown
      }
      this.#fingerprints[this.#present++] = fingerprint(id)
      bad = computed !== stored
    }
    this.#tree.append(Buffer.from(stored, 'hex'))
    if (this.#from + this.#tree.size === this.#anchors[this.#anchorAt]) {
      this.#anchorEdges.push({ size: this.#anchors[this.#anchorAt++], edge: packEdge(this.#tree.edge) })
    }
    return bad
  }

  /** A row that does not match its leaf: its hash and bytes (the report names it from them). */
  mismatch(index: number, id: string, computed: string, stored: string, bytes: string | null, row?: AuditEvent): void {
    this.#mismatched.push({ index, id, computed, stored, bytes, ...(row ? { row } : {}) })
  }

  finish(): RangeResult {
    return {
      from: this.#from, count: this.#tree.size, ...(this.#firstIdx !== undefined ? { firstIdx: this.#firstIdx, lastIdx: this.#prevIdx } : {}),
      ...(this.#gap ? { gap: this.#gap } : {}), present: this.#present, fingerprints: this.#fingerprints.slice(0, this.#present),
      removed: this.#removed, mismatched: this.#mismatched, edge: packEdge(this.#tree.edge), anchors: this.#anchorEdges,
    }
  }
}

function packEdge(edge: readonly Buffer[]): Uint8Array {
  const out = new Uint8Array(edge.length * 32)
  edge.forEach((h, i) => out.set(h.subarray(0, 32), i * 32))
  return out
}

/** The 32-byte hashes of a packed edge. */
export function unpackEdge(edge: Uint8Array): Buffer[] {
  const out: Buffer[] = []
  for (let i = 0; i + 32 <= edge.length; i += 32) out.push(Buffer.from(edge.buffer, edge.byteOffset + i, 32))
  return out
}

/**
 * Two 32-bit FNV-1a lanes over the id's UTF-16 code units, folded into 53 bits: equal ids always
 * agree, so sorting the fingerprints proves ids distinct unless two collide (then the caller takes
 * the long way, which is always right).
 */
export function fingerprint(id: string): number {
  let a = 0x811c9dc5
  let b = 0x01000193 ^ id.length
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i)
    a = Math.imul(a ^ c, 0x01000193)
    b = Math.imul(b ^ c, 0x5bd1e995)
  }
  return (a >>> 0) * 0x200000 + ((b >>> 0) >>> 11)
}

