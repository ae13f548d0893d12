// Warm pool members in the cluster (docs/kubernetes.md "Runtime: warm pools and packs"): a pool member's
// claim and pods carry `corral.dev/pool=warm` until a claim relabels them `claimed` and annotates
// the claimant. The relabel is an update with the object's resourceVersion as precondition, so of
// two claimers (two replicas, a claim racing a retire) exactly one wins: the other gets 409
// Conflict, reads the object again and sees it claimed by someone else.
import type { V1ObjectMeta } from '@kubernetes/client-node'
import { statusCode, type KubeClient } from './kube-client.js'
import { ANNOTATION, LABEL, POOL } from './manifests.js'

/** Attempts at one relabel before giving up (each 409 means someone else wrote the object). */
const ATTEMPTS = 5

interface Relabelled { metadata?: V1ObjectMeta }

/** How to read and replace one object (a PVC or a pod) of the namespace. */
export interface ClaimTarget<T extends Relabelled> {
  read(): Promise<T>
  replace(body: T): Promise<unknown>
}

export type ClaimOutcome = 'won' | 'lost' | 'gone'

/**
 * Marks one object claimed by `claimant`: `won` when this call (or an earlier one of the same
 * claimant) did, `lost` when another claimant has it, `gone` when the object does not exist.
 */
export async function claimObject<T extends Relabelled>(target: ClaimTarget<T>, claimant: string): Promise<ClaimOutcome> {
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    let current: T
    try {
      current = await target.read()
    } catch (err) {
      if (statusCode(err) === 404) return 'gone'
      throw err
    }
    const meta = current.metadata ?? {}
    if (meta.labels?.[LABEL.pool] === POOL.claimed) return meta.annotations?.[ANNOTATION.claimedBy] === claimant ? 'won' : 'lost'
    const body = {
      ...current,
      metadata: {
        ...meta,
        labels: { ...meta.labels, [LABEL.pool]: POOL.claimed },
        annotations: { ...meta.annotations, [ANNOTATION.claimedBy]: claimant },
        // The precondition: the update applies only to the version read above.
        resourceVersion: meta.resourceVersion,
      },
    }
    try {
      await target.replace(body)
      return 'won'
    } catch (err) {
      const code = statusCode(err)
      if (code === 404) return 'gone'
      if (code !== 409) throw err
    }
  }
  return 'lost'
}

export function claimTargets(client: KubeClient, namespace: string) {
  return {
    claim: (name: string): ClaimTarget<Awaited<ReturnType<KubeClient['core']['readNamespacedPersistentVolumeClaim']>>> => ({
      read: () => client.core.readNamespacedPersistentVolumeClaim({ name, namespace }),
      replace: (body) => client.core.replaceNamespacedPersistentVolumeClaim({ name, namespace, body }),
    }),
    pod: (name: string): ClaimTarget<Awaited<ReturnType<KubeClient['core']['readNamespacedPod']>>> => ({
      read: () => client.core.readNamespacedPod({ name, namespace }),
      replace: (body) => client.core.replaceNamespacedPod({ name, namespace, body }),
    }),
  }
}
