// The RFC 9162 tree: known answers, and properties over arbitrary logs — every two sizes of one
// log are consistent, every leaf is included, and any change to any leaf is detected.
import { createHash } from 'node:crypto'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  CompactRange, consistencyProof, hashLeaf, inclusionProof, subtreeRoot, verifyConsistency, verifyInclusion,
} from '../../../src/audit/merkle/index.js'

const leavesOf = (items: string[]) => items.map((s) => hashLeaf(s))

describe('merkle tree', () => {
  it('matches RFC 6962 known answers (the certificate-transparency-go test vectors)', () => {
    // Leaves of the reference test suite: "", 0x00, 0x10, 0x2021, 0x3031, 0x40414243…
    const data = ['', '00', '10', '2021', '3031', '40414243', '5051525354555657', '606162636465666768696a6b6c6d6e6f'].map((h) => Buffer.from(h, 'hex'))
    const leaves = data.map((d) => hashLeaf(d))
    expect(subtreeRoot([]).toString('hex')).toBe(createHash('sha256').digest('hex'))
    expect(subtreeRoot(leaves.slice(0, 1)).toString('hex')).toBe('6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d')
    expect(subtreeRoot(leaves.slice(0, 2)).toString('hex')).toBe('fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125')
    expect(subtreeRoot(leaves.slice(0, 3)).toString('hex')).toBe('aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77')
    expect(subtreeRoot(leaves).toString('hex')).toBe('5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328')
  })

  it('keeps the same root in a compact range as over all leaves', () => {
    fc.assert(fc.property(fc.array(fc.string(), { maxLength: 70 }), (items) => {
      const leaves = leavesOf(items)
      const range = new CompactRange()
      for (const l of leaves) range.append(l)
      expect(range.root().equals(subtreeRoot(leaves))).toBe(true)
      const resumed = new CompactRange(range.size, range.edge)
      resumed.append(hashLeaf('next'))
      expect(resumed.root().equals(subtreeRoot([...leaves, hashLeaf('next')]))).toBe(true)
    }))
  })

  it('any two checkpoints of one log are consistent', () => {
    fc.assert(fc.property(fc.array(fc.string(), { minLength: 1, maxLength: 70 }), fc.nat(), fc.nat(), (items, a, b) => {
      const leaves = leavesOf(items)
      const n = 1 + (Math.max(a, b) % leaves.length)
      const m = Math.min(a, b) % (n + 1)
      const proof = consistencyProof(leaves, m, n)
      expect(verifyConsistency(m, n, proof, subtreeRoot(leaves, 0, m), subtreeRoot(leaves, 0, n))).toBe(true)
    }))
  })

  it('any change to any leaf is detected by inclusion and consistency', () => {
    fc.assert(fc.property(fc.array(fc.string(), { minLength: 2, maxLength: 70 }), fc.nat(), fc.string(), (items, pick, replacement) => {
      const leaves = leavesOf(items)
      const i = pick % leaves.length
      fc.pre(items[i] !== replacement)
      const root = subtreeRoot(leaves)
      const proof = inclusionProof(leaves, i, leaves.length)
      expect(verifyInclusion(i, leaves.length, leaves[i], proof, root)).toBe(true)
      const changed = [...leaves]
      changed[i] = hashLeaf(replacement)
      expect(verifyInclusion(i, leaves.length, changed[i], proof, root)).toBe(false)
      expect(subtreeRoot(changed).equals(root)).toBe(false)
      // The earlier checkpoint that covers leaf i is not a prefix of the changed log.
      const m = i + 1
      const forged = consistencyProof(changed, m, changed.length)
      expect(verifyConsistency(m, changed.length, forged, subtreeRoot(leaves, 0, m), subtreeRoot(changed))).toBe(false)
    }))
  })

  it('refuses a proof for the wrong index or size', () => {
    const leaves = leavesOf(['a', 'b', 'c', 'd', 'e'])
    const root = subtreeRoot(leaves)
    const proof = inclusionProof(leaves, 2, 5)
    expect(verifyInclusion(3, 5, leaves[2], proof, root)).toBe(false)
    expect(verifyInclusion(2, 4, leaves[2], proof, root)).toBe(false)
    expect(verifyConsistency(3, 5, [], subtreeRoot(leaves, 0, 3), root)).toBe(false)
  })
})
