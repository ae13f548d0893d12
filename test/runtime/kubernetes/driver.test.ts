// The Kubernetes driver against the fake API server (test/helpers/fake-kube/): pods, claims,
// Secrets and the NetworkPolicy it creates, agents run by the fake kubelet as local processes,
// /data streamed out and in over the exec WebSocket, and the hostile cases — a pod evicted
// mid-task, a pod deleted behind corral's back while the watch was down, a compacted watch
// (410 Gone), conflicts, a slow pod start. docs/kubernetes.md "Runtime: what was proven where".
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { AgentExit } from '../../../src/runtime/index.js'
import { claimName } from '../../../src/runtime/kubernetes/index.js'
import type { FakeKube } from '../../helpers/fake-kube/index.js'
import { startKubeRuntimes, type KubeRuntimes } from '../../helpers/kube-runtimes.js'
import type { KubernetesRuntimeUnderTest } from '../drivers.js'

let kube: KubeRuntimes
let fake: FakeKube
let dir: string
let seq = 0
const runtime = (env?: Record<string, string>): KubernetesRuntimeUnderTest => kube.runtime(env)

const wsId = (): string => `ws_${Date.now().toString(16)}${(seq++).toString(16).padStart(4, '0')}`
// Scripts write relative to their working directory (/data): the fake kubelet maps container
// paths in argv and the environment, not inside a shell script's text.
const sh = (script: string): string[] => ['sh', '-c', script]
const launch = (command: string[]) => ({ command, proxyToken: 'token-abc', files: { 'tasks.json': '[{"id":"t1"}]' }, env: { CORRAL_MODEL: 'm1' } })

async function within<T>(ms: number, p: Promise<T>): Promise<T | 'late'> {
  return Promise.race([p, new Promise<'late'>((r) => setTimeout(() => r('late'), ms).unref())])
}

beforeAll(async () => {
  kube = await startKubeRuntimes({ prefix: 'corral-k8s-' })
  fake = kube.fake
  dir = kube.dir
})

afterEach(() => {
  fake.kubelet.startDelayMs = 20
})

afterAll(async () => {
  await kube?.close()
})

describe('kubernetes runtime against the fake API server', () => {
  it('check() sets up the NetworkPolicy (retrying a conflict) and says what it relies on', async () => {
    const r = runtime()
    fake.store.create('networkpolicies', 'corral', { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'corral-workspaces' }, spec: {} })
    fake.conflictNext('networkpolicies', 2)
    const check = await r.check()
    expect(check.problems).toEqual([])
    expect(check.ok).toBe(true)
    expect(check.warnings.join(' ')).toMatch(/CNI/)
    const policy = fake.store.get('networkpolicies', 'corral', 'corral-workspaces')
    expect(policy.spec).toMatchObject({ policyTypes: ['Ingress', 'Egress'], ingress: [] })
  })

  it('check() names a missing proxy Service', async () => {
    const check = await runtime({ CORRAL_K8S_PROXY_SERVICE: 'nope' }).check()
    expect(check.ok).toBe(false)
    expect(check.problems.join(' ')).toMatch(/proxy Service nope .* does not exist/)
  })

  it('without the right to read Services, the proxy comes from the service-link variables and the policy from the configured selector', async () => {
    fake.forbidden.add('services')
    try {
      const r = runtime({ CORRAL_PROXY_SERVICE_HOST: '127.0.0.1', CORRAL_PROXY_SERVICE_PORT: '7071', CORRAL_K8S_PROXY_SELECTOR: 'app=corral-test' })
      const check = await r.check()
      expect(check.problems).toEqual([])
      expect(fake.store.get('networkpolicies', 'corral', 'corral-workspaces').spec).toMatchObject({
        egress: [{ to: [{ podSelector: { matchLabels: { app: 'corral-test' } } }], ports: [{ protocol: 'TCP', port: 1 }] }],
      })
      const bare = await runtime().check()
      expect(bare.ok).toBe(false)
      expect(bare.problems.join(' ')).toMatch(/403 Forbidden: grant "get services"/)
    } finally {
      fake.forbidden.delete('services')
    }
  })

  it('runs an agent in a pod with its env and inbox, snapshots /data over exec and forks it into a new claim', async () => {
    const r = runtime()
    const id = wsId()
    const handle = await r.provision({ workspaceId: id, owner: { orgId: 'org_1', roleId: 'role_1' } })
    expect(handle.restoredFrom).toBeNull()
    const claim = fake.store.get('persistentvolumeclaims', 'corral', claimName(id))
    expect(claim.metadata.labels).toMatchObject({ 'corral.dev/org': 'org_1', 'corral.dev/role': 'role_1', 'corral.dev/workspace': id })
    const proc = await r.startAgent(id, launch(sh('printf "%s|%s|%s" "$CORRAL_MODEL" "$HTTPS_PROXY" "$(cat "$CORRAL_INBOX/tasks.json")" > out.txt; mkdir -p sub; echo x > sub/y.md; exit 3')))
    const exit = await within(10_000, proc.exited)
    expect(exit).toEqual({ code: 3, signal: null })
    const out = readFileSync(join(fake.kubelet.claimDir(claimName(id)), 'out.txt'), 'utf8')
    expect(out).toBe('m1|http://corral:token-abc@127.0.0.1:7071|[{"id":"t1"}]')
    const snap = await r.snapshot(id, 1, 'task')
    const files = await r.listSnapshotFiles(id)
    expect(files.map((f) => f.path).sort()).toEqual(['out.txt', 'sub', 'sub/y.md'])
    expect(files.find((f) => f.path === 'sub/y.md')).toMatchObject({ size: 2, is_dir: false, mime_type: 'text/markdown' })

    const child = wsId()
    const forked = await r.provision({ workspaceId: child, forkFrom: { workspaceId: id, taskCount: 1 } })
    expect(forked.restoredFrom?.ref).toBe(snap.ref)
    expect(readFileSync(join(fake.kubelet.claimDir(claimName(child)), 'sub', 'y.md'), 'utf8')).toBe('x\n')
    // The token never reaches a pod's spec: only its Secret, which goes when the agent is over.
    for (const p of fake.store.list('pods', 'corral')) expect(JSON.stringify(p)).not.toContain('token-abc')
    const deadline = Date.now() + 5000
    while (fake.store.list('secrets', 'corral', `corral.dev/workspace=${id}`).length > 0 && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50))
    expect(fake.store.list('secrets', 'corral', `corral.dev/workspace=${id}`)).toEqual([])
  })

  it('places uploads into /data and measures it through the pod', async () => {
    const r = runtime()
    const id = wsId()
    const handle = await r.provision({ workspaceId: id })
    const staged = mkdtempSync(join(dir, 'staged-'))
    writeFileSync(join(staged, 'a.csv'), 'a,b\n1,2\n')
    await r.placeFiles(id, ['uploads', 'task_1'], staged, ['a.csv'])
    expect(readFileSync(join(fake.kubelet.claimDir(claimName(id)), 'uploads', 'task_1', 'a.csv'), 'utf8')).toBe('a,b\n1,2\n')
    expect((await handle.volume.usage()).usedBytes).toBeGreaterThan(0)
    await expect(r.placeFiles(id, ['..'], staged, ['a.csv'])).rejects.toMatchObject({ code: 'unsafe_path' })
  })

  it('stopAgent deletes the pod and resolves once the agent is gone; stop snapshots and leaves no pod', async () => {
    const r = runtime()
    const id = wsId()
    await r.provision({ workspaceId: id })
    const proc = await r.startAgent(id, launch(sh('echo started > s; exec sleep 60')))
    await expect(r.startAgent(id, launch(sh('true')))).rejects.toMatchObject({ code: 'agent_running' })
    await r.stopAgent(id)
    expect(await within(1000, proc.exited)).not.toBe('late')
    const snap = await r.stop(id, 0)
    expect(snap.reason).toBe('stop')
    expect((await r.listSnapshotFiles(id)).map((f) => f.path)).toEqual(['s'])
    const deadline = Date.now() + 5000
    while (fake.store.list('pods', 'corral', `corral.dev/workspace=${id}`).length > 0 && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50))
    expect(fake.store.list('pods', 'corral', `corral.dev/workspace=${id}`)).toEqual([])
  })

  it('a pod evicted mid-task ends the agent within seconds, and /data is still snapshotted', async () => {
    const r = runtime()
    const id = wsId()
    await r.provision({ workspaceId: id })
    const proc = await r.startAgent(id, launch(sh('echo before > evidence; exec sleep 60')))
    const pod = fake.store.list('pods', 'corral', `corral.dev/workspace=${id}`)[0]!
    await new Promise((res) => setTimeout(res, 100))
    fake.kubelet.evict('corral', pod.metadata.name)
    const exit = await within(5000, proc.exited)
    expect(exit).toEqual({ code: null, signal: 'SIGKILL' } satisfies AgentExit)
    await r.snapshot(id, 1, 'task')
    expect((await r.listSnapshotFiles(id)).map((f) => f.path)).toEqual(['evidence'])
  })

  it('a pod deleted while the watch was down (dropped, then compacted: 410 Gone) is noticed by the re-list', async () => {
    const r = runtime()
    await r.check()
    const id = wsId()
    await r.provision({ workspaceId: id })
    const proc = await r.startAgent(id, launch(sh('exec sleep 60')))
    const lists = r.driver.watchStats.lists
    const pod = fake.store.list('pods', 'corral', `corral.dev/workspace=${id}`)[0]!
    fake.dropWatches()
    fake.kubelet.delete('corral', pod.metadata.name, 0)
    fake.compact()
    const exit = await within(5000, proc.exited)
    expect(exit).toEqual({ code: null, signal: 'SIGKILL' })
    expect(r.driver.watchStats.lists).toBeGreaterThan(lists)
  })

  it('a slow pod start is waited for; one slower than the start timeout fails clearly and leaves no pod', async () => {
    const r = runtime({ CORRAL_K8S_POD_START_TIMEOUT_MS: '1000' })
    const id = wsId()
    await r.provision({ workspaceId: id })
    fake.kubelet.startDelayMs = 400
    const proc = await r.startAgent(id, launch(sh('exit 0')))
    expect(await within(5000, proc.exited)).toEqual({ code: 0, signal: null })
    fake.kubelet.startDelayMs = 3000
    await expect(r.startAgent(id, launch(sh('exit 0')))).rejects.toThrow(/did not start within 1000 ms/)
    expect(fake.store.list('pods', 'corral', `corral.dev/workspace=${id},corral.dev/pod-kind=agent`)).toEqual([])
  })

  it('adopt() follows agents another driver started (a takeover): the task goes on, its end is seen', async () => {
    const first = runtime()
    const id = wsId()
    await first.provision({ workspaceId: id })
    await first.startAgent(id, launch(sh('sleep 1; echo done > done')))
    await first.close()
    const second = runtime()
    const adopted = await second.driver.adopt([id])
    expect(adopted.map((a) => a.workspaceId)).toEqual([id])
    expect(await within(10_000, adopted[0]!.process.exited)).toEqual({ code: 0, signal: null })
    expect(existsSync(join(fake.kubelet.claimDir(claimName(id)), 'done'))).toBe(true)
  })
})
