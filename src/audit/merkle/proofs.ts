// Proofs served from the store: the inclusion proof of one row in a checkpointed tree and the
// consistency proof between two checkpoints (RFC 9162 §2.1.3, §2.1.4), hashes as hex. The leaf
// hashes of the tree's prefix are read from the store for each proof: linear in the tree's size,
// which is fine for an auditor's occasional question, not for a hot path.
import type { Store } from '../../store/index.js'
import { consistencyProof, inclusionProof } from './tree.js'

export interface InclusionAnswer {
  id: string
  leaf_index: number
  leaf_hash: string
  tree_size: number
  root_hash: string
  checkpoint: string
  proof: string[]
}

export interface ConsistencyAnswer {
  from_size: number
  to_size: number
  from_root: string
  to_root: string
  proof: string[]
}

async function leafHashes(store: Store, orgId: string, size: number): Promise<Buffer[]> {
  const out: Buffer[] = []
  for (let from = 0; from < size; from += 10_000) {
    for (const l of await store.auditLog.leaves(orgId, from, Math.min(size, from + 10_000))) out.push(Buffer.from(l.leafHash, 'hex'))
  }
  return out
}

/** `undefined` when the row is in no leaf of a checkpoint (`size`: that checkpoint, else the latest). */
export async function inclusionFor(store: Store, orgId: string, id: string, size?: number): Promise<InclusionAnswer | 'no_leaf' | 'no_checkpoint'> {
  const leaf = await store.auditLog.leafOf(orgId, id)
  if (!leaf) return 'no_leaf'
  const cp = size === undefined ? await store.auditLog.latestCheckpoint(orgId) : await store.auditLog.checkpoint(orgId, size)
  if (!cp || cp.size <= leaf.idx) return 'no_checkpoint'
  const hashes = await leafHashes(store, orgId, cp.size)
  return {
    id, leaf_index: leaf.idx, leaf_hash: leaf.leafHash, tree_size: cp.size, root_hash: cp.root, checkpoint: cp.note,
    proof: inclusionProof(hashes, leaf.idx, cp.size).map((h) => h.toString('hex')),
  }
}

/** `undefined` when either size is not a stored checkpoint of the org. */
export async function consistencyFor(store: Store, orgId: string, from: number, to: number): Promise<ConsistencyAnswer | undefined> {
  const [a, b] = await Promise.all([store.auditLog.checkpoint(orgId, from), store.auditLog.checkpoint(orgId, to)])
  if (!a || !b || a.size > b.size) return undefined
  const hashes = await leafHashes(store, orgId, b.size)
  return { from_size: a.size, to_size: b.size, from_root: a.root, to_root: b.root, proof: consistencyProof(hashes, a.size, b.size).map((h) => h.toString('hex')) }
}
