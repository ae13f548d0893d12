// The Merkle tree of RFC 9162 §2.1 (the tree of RFC 6962): leaf hash SHA-256(0x00 || bytes), node
// hash SHA-256(0x01 || left || right), a tree of n leaves split at the largest power of two below
// n. Inclusion and consistency proofs and their verification follow the RFC's algorithms
// (§2.1.3, §2.1.4) so that any RFC 6962 verifier reads our proofs. Hashes are 32-byte Buffers.
import { createHash, hash } from 'node:crypto'

export type Hash = Buffer

const LEAF = Buffer.from([0])
const EMPTY = createHash('sha256').digest()
/** 0x01 || left || right, reused: a node hash is one one-shot digest of 65 bytes (hashed before anything else runs). */
const NODE_INPUT = Buffer.alloc(65, 1)

export function hashLeaf(bytes: Buffer | string): Hash {
  // A string is hashed as its UTF-8 bytes; U+0000 is the byte 0x00.
  return typeof bytes === 'string' ? hash('sha256', `\0${bytes}`, 'buffer') : createHash('sha256').update(LEAF).update(bytes).digest()
}

/** The leaf hash of `bytes` (UTF-8) in hex: what the store keeps and an export lists. */
export function hashLeafHex(bytes: string): string {
  return hash('sha256', `\0${bytes}`, 'hex')
}

export function hashChildren(left: Hash, right: Hash): Hash {
  left.copy(NODE_INPUT, 1)
  right.copy(NODE_INPUT, 33)
  return hash('sha256', NODE_INPUT, 'buffer')
}

/** The largest power of two strictly below n (n ≥ 2). */
function split(n: number): number {
  let k = 1
  while (k * 2 < n) k *= 2
  return k
}

/** MTH(D[lo:hi]) over leaf hashes. Level by level: an unpaired last node moves up unchanged, which is the RFC's split. */
export function subtreeRoot(leaves: readonly Hash[], lo = 0, hi = leaves.length): Hash {
  if (hi <= lo) return EMPTY
  let level = leaves.slice(lo, hi)
  while (level.length > 1) {
    const next: Hash[] = []
    for (let i = 0; i + 1 < level.length; i += 2) next.push(hashChildren(level[i], level[i + 1]))
    if (level.length % 2 === 1) next.push(level[level.length - 1])
    level = next
  }
  return level[0]
}

/** The audit path of leaf `index` in the tree of the first `size` leaves (RFC 9162 §2.1.3.1). */
export function inclusionProof(leaves: readonly Hash[], index: number, size: number): Hash[] {
  if (!(index >= 0 && index < size && size <= leaves.length)) throw new RangeError(`no leaf ${index} in a tree of ${size}`)
  const path = (m: number, lo: number, hi: number): Hash[] => {
    const n = hi - lo
    if (n <= 1) return []
    const k = split(n)
    return m < k
      ? [...path(m, lo, lo + k), subtreeRoot(leaves, lo + k, hi)]
      : [...path(m - k, lo + k, hi), subtreeRoot(leaves, lo, lo + k)]
  }
  return path(index, 0, size)
}

/** The consistency proof from the tree of `m` leaves to the tree of `n` (RFC 9162 §2.1.4.1). */
export function consistencyProof(leaves: readonly Hash[], m: number, n: number): Hash[] {
  if (!(m >= 0 && m <= n && n <= leaves.length)) throw new RangeError(`no consistency proof from ${m} to ${n}`)
  if (m === 0 || m === n) return []
  const sub = (mm: number, lo: number, hi: number, whole: boolean): Hash[] => {
    const size = hi - lo
    if (mm === size) return whole ? [] : [subtreeRoot(leaves, lo, hi)]
    const k = split(size)
    return mm <= k
      ? [...sub(mm, lo, lo + k, whole), subtreeRoot(leaves, lo + k, hi)]
      : [...sub(mm - k, lo + k, hi, false), subtreeRoot(leaves, lo, lo + k)]
  }
  return sub(m, 0, n, true)
}

/** RFC 9162 §2.1.3.2: whether `proof` shows leaf `index` with hash `leaf` in the tree of `size` with `root`. */
export function verifyInclusion(index: number, size: number, leaf: Hash, proof: readonly Hash[], root: Hash): boolean {
  if (!(index >= 0 && index < size)) return false
  let fn = index
  let sn = size - 1
  let r = leaf
  for (const p of proof) {
    if (sn === 0) return false
    if (fn % 2 === 1 || fn === sn) {
      r = hashChildren(p, r)
      if (fn % 2 === 0) {
        do {
          fn = Math.floor(fn / 2)
          sn = Math.floor(sn / 2)
        } while (fn % 2 === 0 && fn !== 0)
      }
    } else {
      r = hashChildren(r, p)
    }
    fn = Math.floor(fn / 2)
    sn = Math.floor(sn / 2)
  }
  return sn === 0 && r.equals(root)
}

/** RFC 9162 §2.1.4.2: whether `proof` shows the tree (size1, root1) is a prefix of (size2, root2). */
export function verifyConsistency(size1: number, size2: number, proof: readonly Hash[], root1: Hash, root2: Hash): boolean {
  if (size1 < 0 || size2 < size1) return false
  if (size1 === size2) return proof.length === 0 && root1.equals(root2)
  if (size1 === 0) return proof.length === 0
  if (proof.length === 0) return false
  const path = isPowerOfTwo(size1) ? [root1, ...proof] : [...proof]
  let fn = size1 - 1
  let sn = size2 - 1
  while (fn % 2 === 1) {
    fn = Math.floor(fn / 2)
    sn = Math.floor(sn / 2)
  }
  let fr = path[0]
  let sr = path[0]
  for (const c of path.slice(1)) {
    if (sn === 0) return false
    if (fn % 2 === 1 || fn === sn) {
      fr = hashChildren(c, fr)
      sr = hashChildren(c, sr)
      if (fn % 2 === 0) {
        do {
          fn = Math.floor(fn / 2)
          sn = Math.floor(sn / 2)
        } while (fn % 2 === 0 && fn !== 0)
      }
    } else {
      sr = hashChildren(sr, c)
    }
    fn = Math.floor(fn / 2)
    sn = Math.floor(sn / 2)
  }
  return sn === 0 && fr.equals(root1) && sr.equals(root2)
}

function isPowerOfTwo(n: number): boolean {
  return n > 0 && (n & (n - 1)) === 0
}

/**
 * The right edge of a tree: the roots of its perfect subtrees, largest first (one per set bit of
 * the size). Enough to append a leaf and to compute the root without the leaves before it, which
 * is what the store keeps between appends.
 */
export class CompactRange {
  #size: number
  readonly #edge: Hash[]

  constructor(size = 0, edge: readonly Hash[] = []) {
    if (popCount(size) !== edge.length) throw new Error(`a compact range of ${size} leaves has ${popCount(size)} hashes, not ${edge.length}`)
    this.#size = size
    this.#edge = [...edge]
  }

  get size(): number {
    return this.#size
  }

  get edge(): readonly Hash[] {
    return this.#edge
  }

  append(leaf: Hash): void {
    let h = leaf
    let s = this.#size
    while (s % 2 === 1) {
      h = hashChildren(this.#edge.pop()!, h)
      s = Math.floor(s / 2)
    }
    this.#edge.push(h)
    this.#size++
  }

  /**
   * Appends a range of `count` leaves given as its own compact edge (one root per set bit of
   * `count`, largest first). The range must start where a subtree of its largest part can: the
   * size now is a multiple of that part's size.
   */
  extend(count: number, edge: readonly Hash[]): void {
    let i = 0
    for (let bit = 2 ** Math.floor(Math.log2(Math.max(count, 1))); bit >= 1; bit /= 2) {
      if (Math.floor(count / bit) % 2 === 0) continue
      if (this.#size % bit !== 0) throw new RangeError(`a subtree of ${bit} leaves cannot start at ${this.#size}`)
      let h = edge[i++]
      let s = this.#size / bit
      while (s % 2 === 1) {
        h = hashChildren(this.#edge.pop()!, h)
        s = Math.floor(s / 2)
      }
      this.#edge.push(h)
      this.#size += bit
    }
  }

  clone(): CompactRange {
    return new CompactRange(this.#size, this.#edge)
  }

  root(): Hash {
    if (this.#edge.length === 0) return EMPTY
    let r = this.#edge[this.#edge.length - 1]
    for (let i = this.#edge.length - 2; i >= 0; i--) r = hashChildren(this.#edge[i], r)
    return r
  }
}

function popCount(n: number): number {
  let c = 0
  for (let x = n; x > 0; x = Math.floor(x / 2)) c += x % 2
  return c
}
