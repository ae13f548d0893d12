// The start-up CNI probe (src/runtime/kubernetes/cni-probe.ts) against the fake API server: what
// runs in kube-system decides a loud warning or, with CORRAL_K8S_NETWORK_POLICY_CHECK=require, a
// refusal; a Role that cannot list kube-system says it cannot tell. docs/kubernetes.md
// "Runtime: network" (proven against the fake only: no real CNI runs here).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { kubernetesSettingsFromEnv } from '../../../src/runtime/index.js'
import { openKubeClient } from '../../../src/runtime/kubernetes/index.js'
import { DEFAULT_LIMITS } from '../../../src/runtime/limits.js'
import { FakeKube } from '../../helpers/fake-kube/index.js'
import { kubernetesRuntime, type KubernetesRuntimeUnderTest } from '../drivers.js'

let fake: FakeKube
let dir: string
let kubeconfig: string
const runtimes: KubernetesRuntimeUnderTest[] = []

function runtime(env: Record<string, string> = {}): KubernetesRuntimeUnderTest {
  const settings = kubernetesSettingsFromEnv({ CORRAL_AGENT_IMAGE: 'corral-agent:test', CORRAL_K8S_KUBECONFIG: kubeconfig, ...env }, DEFAULT_LIMITS)
  const r = kubernetesRuntime({ root: join(dir, `runtime-${runtimes.length}`), proxy: { host: '127.0.0.1', port: 1 }, settings, warn: () => {}, client: openKubeClient(settings) })
  runtimes.push(r)
  return r
}

/** A node agent of a network plugin, as its DaemonSet would make it (the kubelet does not run it). */
function nodeAgent(name: string, labels: Record<string, string>, containers = ['main']): void {
  fake.store.create('pods', 'kube-system', { apiVersion: 'v1', kind: 'Pod', metadata: { name, labels }, spec: { containers: containers.map((c) => ({ name: c, image: `${c}:1` })) } })
}

function clearKubeSystem(): void {
  for (const p of fake.store.list('pods', 'kube-system')) fake.store.remove('pods', 'kube-system', p.metadata.name)
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'corral-k8s-cni-'))
  fake = await FakeKube.start({ root: join(dir, 'kubelet'), namespaces: ['corral', 'kube-system'] })
  kubeconfig = join(dir, 'kubeconfig')
  writeFileSync(kubeconfig, fake.kubeconfig())
  fake.store.create('services', 'corral', {
    apiVersion: 'v1', kind: 'Service', metadata: { name: 'corral-proxy' },
    spec: { clusterIP: '127.0.0.1', selector: { 'app.kubernetes.io/name': 'corral' }, ports: [{ name: 'proxy', port: 7071, targetPort: 7071 }] },
  })
})

afterEach(() => {
  clearKubeSystem()
  fake.forbiddenNamespaces.clear()
})

afterAll(async () => {
  for (const r of runtimes) await r.close()
  await fake?.close()
  rmSync(dir, { recursive: true, force: true })
})

describe('the CNI probe at start', () => {
  it('a CNI that enforces NetworkPolicy (calico, cilium, …) found in kube-system: no warning, even with require', async () => {
    nodeAgent('calico-node-x7k2p', { 'k8s-app': 'calico-node' })
    nodeAgent('kube-proxy-abcde', { 'k8s-app': 'kube-proxy' })
    for (const mode of ['warn', 'require']) {
      const check = await runtime({ CORRAL_K8S_NETWORK_POLICY_CHECK: mode }).check()
      expect(check.problems).toEqual([])
      expect(check.ok).toBe(true)
      expect(check.warnings.join(' ')).not.toMatch(/CNI|NetworkPolicy/)
    }
    clearKubeSystem()
    nodeAgent('cilium-9fz2q', {})
    expect((await runtime({ CORRAL_K8S_NETWORK_POLICY_CHECK: 'require' }).check()).ok).toBe(true)
  })

  it('a CNI that does not enforce it (flannel, kindnet) warns loudly and names it; require refuses the runtime', async () => {
    nodeAgent('kube-flannel-ds-4hx8m', { app: 'flannel' })
    nodeAgent('kindnet-2kq9d', { app: 'kindnet' })
    const warned = await runtime().check()
    expect(warned.ok).toBe(true)
    expect(warned.warnings.join('\n')).toMatch(/^WARNING kubernetes: the cluster's CNI \(flannel, kindnet\) does not enforce NetworkPolicy/m)
    const refused = await runtime({ CORRAL_K8S_NETWORK_POLICY_CHECK: 'require' }).check()
    expect(refused.ok).toBe(false)
    expect(refused.problems.join(' ')).toMatch(/does not enforce NetworkPolicy.*refusing the runtime \(CORRAL_K8S_NETWORK_POLICY_CHECK=require/)
  })

  it('the AWS VPC CNI counts only with its network policy agent beside it', async () => {
    nodeAgent('aws-node-abcde', { 'k8s-app': 'aws-node' }, ['aws-node'])
    expect((await runtime({ CORRAL_K8S_NETWORK_POLICY_CHECK: 'require' }).check()).ok).toBe(false)
    clearKubeSystem()
    nodeAgent('aws-node-fghij', { 'k8s-app': 'aws-node' }, ['aws-node', 'aws-network-policy-agent'])
    expect((await runtime({ CORRAL_K8S_NETWORK_POLICY_CHECK: 'require' }).check()).ok).toBe(true)
  })

  it('no known CNI: a warning saying so', async () => {
    const check = await runtime().check()
    expect(check.ok).toBe(true)
    expect(check.warnings.join(' ')).toMatch(/no known CNI that enforces NetworkPolicy .* runs in kube-system/)
  })

  it('a Role that cannot list kube-system (403): "cannot tell" as a warning, a refusal with require', async () => {
    fake.forbiddenNamespaces.add('kube-system')
    nodeAgent('calico-node-x7k2p', { 'k8s-app': 'calico-node' })
    const warned = await runtime().check()
    expect(warned.ok).toBe(true)
    expect(warned.warnings.join(' ')).toMatch(/cannot tell whether the cluster's CNI enforces NetworkPolicy — corral may not list pods in kube-system \(403 Forbidden/)
    const refused = await runtime({ CORRAL_K8S_NETWORK_POLICY_CHECK: 'require' }).check()
    expect(refused.ok).toBe(false)
    expect(refused.problems.join(' ')).toMatch(/cannot tell .* refusing the runtime/)
  })

  it('off skips the probe (no kube-system request) and says so; a bad value names its variable', async () => {
    const before = fake.requests.filter((r) => r.path.includes('/kube-system/')).length
    const check = await runtime({ CORRAL_K8S_NETWORK_POLICY_CHECK: 'off' }).check()
    expect(check.ok).toBe(true)
    expect(check.warnings.join(' ')).toMatch(/CNI probe is off/)
    expect(fake.requests.filter((r) => r.path.includes('/kube-system/')).length).toBe(before)
    expect(() => kubernetesSettingsFromEnv({ CORRAL_AGENT_IMAGE: 'x', CORRAL_K8S_NETWORK_POLICY_CHECK: 'maybe' }, DEFAULT_LIMITS)).toThrow(/CORRAL_K8S_NETWORK_POLICY_CHECK must be warn, require or off/)
  })
})
