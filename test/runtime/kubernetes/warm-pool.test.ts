// Warm pool members as the Kubernetes driver keeps them (docs/kubernetes.md "Runtime: warm
// pools"), against the fake API server: a pooled member's claim and pods carry
// corral.dev/pool=warm; claimWarm relabels them `claimed` with the read resourceVersion as
// precondition, so of concurrent claimers (several drivers: replicas) exactly one wins each member
// (the fake answers 409 Conflict to a stale resourceVersion); a claimed member's pod evicted is
// noticed by the watch.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Pod } from 'kubernetes-models/v1'
import { kubernetesSettingsFromEnv } from '../../../src/runtime/index.js'
import { agentPod, claimName, podName } from '../../../src/runtime/kubernetes/index.js'
import { DEFAULT_LIMITS } from '../../../src/runtime/limits.js'
import type { FakeKube } from '../../helpers/fake-kube/index.js'
import { startKubeRuntimes, type KubeRuntimes } from '../../helpers/kube-runtimes.js'
import type { KubernetesRuntimeUnderTest } from '../drivers.js'

let kube: KubeRuntimes
let fake: FakeKube
let seq = 0
const runtime = (env?: Record<string, string>): KubernetesRuntimeUnderTest => kube.runtime(env)

const wsId = (): string => `ws_${Date.now().toString(16)}${(seq++).toString(16).padStart(4, '0')}`
const owner = { orgId: 'org_1', roleId: 'role_pool' }
const waiting = { command: ['sh', '-c', 'exec sleep 60'], proxyToken: 'startup-token', files: {}, env: {} }
const pool = (o: { metadata: { labels?: Record<string, string>; annotations?: Record<string, string> } }) => [o.metadata.labels?.['corral.dev/pool'], o.metadata.annotations?.['corral.dev/claimed-by']]
const podsOf = (id: string) => fake.store.list('pods', 'corral', `corral.dev/workspace=${id}`)

/** A warm member as the lifecycle makes one: provisioned `pooled`, its agent started ahead. */
async function member(r: KubernetesRuntimeUnderTest): Promise<string> {
  const id = wsId()
  await r.provision({ workspaceId: id, owner, pooled: true })
  await r.startAgent(id, waiting)
  return id
}

beforeAll(async () => {
  kube = await startKubeRuntimes({ prefix: 'corral-k8s-pool-', ca: false })
  fake = kube.fake
})

afterAll(async () => {
  await kube?.close()
})

describe('warm pool members on kubernetes', () => {
  it('a pooled member is labelled warm (claim and pods, a valid Pod); of two drivers claiming it at once exactly one wins', async () => {
    const [a, b] = [runtime(), runtime()]
    const id = await member(a)
    expect(pool(fake.store.get('persistentvolumeclaims', 'corral', claimName(id)))).toEqual(['warm', undefined])
    expect(podsOf(id).map(pool)).toEqual([['warm', undefined]])
    expect(fake.store.list('pods', 'corral', 'corral.dev/pool=warm,corral.dev/role=role_pool').map((p) => p.metadata.name)).toEqual(podsOf(id).map((p) => p.metadata.name))
    const manifest = agentPod(kubernetesSettingsFromEnv({ CORRAL_AGENT_IMAGE: 'corral-agent:test' }, DEFAULT_LIMITS), podName(id, 'abcde'), id, { ...owner, pool: 'warm' }, { ...waiting, proxyUrl: 'http://10.0.0.1:7071', baseEnv: {}, stopGraceSeconds: 5 })
    expect(() => new Pod(manifest as never).validate()).not.toThrow()

    const results = await Promise.all([a.driver.claimWarm(id, 'task_a'), b.driver.claimWarm(id, 'task_b')])
    expect(results.filter(Boolean)).toHaveLength(1)
    const winner = results[0] ? 'task_a' : 'task_b'
    expect(pool(fake.store.get('persistentvolumeclaims', 'corral', claimName(id)))).toEqual(['claimed', winner])
    expect(podsOf(id).map(pool)).toEqual([['claimed', winner]])
    // The claim is idempotent for its claimant and stays lost for the other.
    expect(await b.driver.claimWarm(id, winner)).toBe(true)
    expect(await a.driver.claimWarm(id, winner === 'task_a' ? 'task_b' : 'task_a')).toBe(false)
    // A claimed member's pod kept running: the relabel is an update of the pod, not a new one.
    expect(podsOf(id)[0]!.status?.phase).toBe('Running')
  })

  it('six claimers over three drivers race for three members: each member has exactly one winner, conflicts on the way', async () => {
    const drivers = [runtime(), runtime(), runtime()]
    const members = [await member(drivers[0]!), await member(drivers[1]!), await member(drivers[2]!)]
    fake.conflictNext('persistentvolumeclaims', 3)
    const claimers = Array.from({ length: 6 }, (_, i) => ({ driver: drivers[i % 3]!, claimant: `task_${i}` }))
    const won = await Promise.all(claimers.map(async ({ driver, claimant }) => {
      for (const id of members) if (await driver.driver.claimWarm(id, claimant)) return { id, claimant }
      return undefined
    }))
    const winners = won.filter((w) => w !== undefined)
    expect(winners).toHaveLength(3)
    expect(new Set(winners.map((w) => w.id)).size).toBe(3)
    for (const w of winners) expect(pool(fake.store.get('persistentvolumeclaims', 'corral', claimName(w.id)))).toEqual(['claimed', w.claimant])
  })

  it('a claimed member whose pod is evicted: the watch ends its agent; a member gone is not claimable', async () => {
    const r = runtime()
    const id = wsId()
    await r.provision({ workspaceId: id, owner, pooled: true })
    const proc = await r.startAgent(id, waiting)
    expect(await r.driver.claimWarm(id, 'task_e')).toBe(true)
    await new Promise((res) => setTimeout(res, 50))
    fake.kubelet.evict('corral', podsOf(id)[0]!.metadata.name)
    const exit = await Promise.race([proc.exited, new Promise<'late'>((res) => setTimeout(() => res('late'), 5000).unref())])
    expect(exit).toEqual({ code: null, signal: 'SIGKILL' })
    const gone = wsId()
    expect(await r.driver.claimWarm(gone, 'task_f')).toBe(false)
  })

  it('an ordinary workspace carries no pool label, and a pod update may not change the spec (the fake answers 422)', async () => {
    const r = runtime()
    const id = wsId()
    await r.provision({ workspaceId: id, owner })
    await r.startAgent(id, waiting)
    expect(pool(fake.store.get('persistentvolumeclaims', 'corral', claimName(id)))).toEqual([undefined, undefined])
    const pod = podsOf(id)[0]!
    const changed = { ...pod, spec: { ...pod.spec, volumes: [] } }
    expect(() => fake.store.replace('pods', 'corral', pod.metadata.name, changed)).toThrow(/pod updates may not change fields/)
    await r.stopAgent(id)
  })
})
