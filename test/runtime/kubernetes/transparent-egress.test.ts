// Transparent egress on Kubernetes against the fake API server (docs/kubernetes.md "Transparent
// egress and DNS"): the objects the driver creates for each mode — the pod's DNS pointed at its own
// `egress` container, the redirect rules (an init container with NET_ADMIN alone, or annotations for
// a CNI plugin), every container that runs beside the agent without privileges, and the
// NetworkPolicy still allowing nothing but the proxy. That the rules and the relay work is proven
// for real in test/runtime/kubernetes/egress-netns.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Pod } from 'kubernetes-models/v1'
import { kubernetesSettingsFromEnv } from '../../../src/runtime/index.js'
import { EGRESS_ANNOTATION, EGRESS_CONTAINER, EGRESS_INIT_CONTAINER, EGRESS_KEY, agentPod, podName, privilegeProblems } from '../../../src/runtime/kubernetes/index.js'
import { DEFAULT_LIMITS } from '../../../src/runtime/limits.js'
import type { FakeKube } from '../../helpers/fake-kube/index.js'
import { startKubeRuntimes, type KubeRuntimes } from '../../helpers/kube-runtimes.js'
import type { KubernetesRuntimeUnderTest } from '../drivers.js'

let kube: KubeRuntimes
let fake: FakeKube
let seq = 0
const runtime = (env?: Record<string, string>): KubernetesRuntimeUnderTest => kube.runtime(env)

type Container = { name: string; command?: string[]; securityContext: { runAsUser?: number; runAsNonRoot?: boolean; allowPrivilegeEscalation?: boolean; privileged?: boolean; capabilities?: { drop?: string[]; add?: string[] } }; env?: { name: string; value?: string; valueFrom?: unknown }[] }
type PodObject = {
  metadata: { name: string; annotations: Record<string, string> }
  spec: { dnsPolicy?: string; dnsConfig?: { nameservers: string[]; searches: string[] }; securityContext: { runAsNonRoot?: boolean; sysctls?: { name: string; value: string }[] }; initContainers?: Container[]; containers: Container[]; volumes: { name: string }[] }
}

async function agentPodOf(r: KubernetesRuntimeUnderTest): Promise<{ pod: PodObject; secret: Record<string, string> }> {
  const id = `ws_${Date.now().toString(16)}${(seq++).toString(16).padStart(4, '0')}`
  await r.provision({ workspaceId: id })
  const agent = await r.startAgent(id, { command: ['sh', '-c', 'exit 0'], proxyToken: 'token-abc', files: {}, env: {} })
  const pod = fake.store.list('pods', 'corral', `corral.dev/workspace=${id},corral.dev/pod-kind=agent`)[0] as unknown as PodObject
  const secret = fake.store.get('secrets', 'corral', pod.metadata.name).data as Record<string, string>
  await agent.exited
  return { pod, secret: Object.fromEntries(Object.entries(secret).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()])) }
}

beforeAll(async () => {
  kube = await startKubeRuntimes({ prefix: 'corral-k8s-egress-', proxyClusterIP: '10.96.0.12' })
  fake = kube.fake
})

afterAll(async () => {
  await kube?.close()
})

describe('transparent egress on Kubernetes (fake API server)', () => {
  it('mode init: the pod resolves through its egress container; only the exited init container holds NET_ADMIN', async () => {
    const r = runtime({ CORRAL_K8S_TRANSPARENT_EGRESS: 'init', CORRAL_K8S_EGRESS_INIT_IMAGE: 'corral-egress-init:test' })
    const check = await r.check()
    expect(check.ok).toBe(true)
    expect(check.warnings.join(' ')).toMatch(/NET_ADMIN.*restricted/)
    const { pod, secret } = await agentPodOf(r)
    expect(() => new Pod(pod as never).validate()).not.toThrow()
    expect(pod.spec.dnsPolicy).toBe('None')
    expect(pod.spec.dnsConfig).toMatchObject({ nameservers: ['127.0.0.1'], searches: [] })
    expect(pod.spec.securityContext.sysctls).toEqual([{ name: 'net.ipv4.ip_unprivileged_port_start', value: '53' }])
    expect(pod.spec.initContainers).toHaveLength(1)
    const init = pod.spec.initContainers![0]!
    expect(init).toMatchObject({ name: EGRESS_INIT_CONTAINER, image: 'corral-egress-init:test', command: ['nft', '-f', '/run/corral/egress/rules.nft'] })
    expect(init.securityContext).toMatchObject({ privileged: false, allowPrivilegeEscalation: false, runAsUser: 0, capabilities: { drop: ['ALL'], add: ['NET_ADMIN'] } })
    // Every container that runs while the agent does: no capability, no escalation, not root.
    expect(pod.spec.containers.map((c) => c.name)).toEqual(['agent', 'keeper', EGRESS_CONTAINER])
    expect(privilegeProblems(pod)).toEqual([])
    for (const c of pod.spec.containers) {
      expect(c.securityContext, c.name).toMatchObject({ allowPrivilegeEscalation: false, privileged: false, runAsNonRoot: true, capabilities: { drop: ['ALL'] } })
      expect(c.securityContext.capabilities?.add, c.name).toBeUndefined()
    }
    const relay = pod.spec.containers.find((c) => c.name === EGRESS_CONTAINER)!
    expect(relay.env).toEqual([{ name: 'CORRAL_EGRESS_PROXY', value: '10.96.0.12:7071' }, { name: 'CORRAL_PROXY_TOKEN', valueFrom: { secretKeyRef: { name: pod.metadata.name, key: 'proxy-token' } } }])
    // The rules leave the proxy Service and loopback alone and redirect every other TCP connection.
    expect(secret[EGRESS_KEY.rules]).toContain('ip daddr 10.96.0.12 tcp dport 7071 return')
    expect(secret[EGRESS_KEY.rules]).toContain('meta l4proto tcp redirect to :15001')
    expect(secret[EGRESS_KEY.relay]).toContain('getsockopt(STDIN, 0, 80)')
    expect(JSON.stringify(pod)).not.toContain('token-abc')
    // The NetworkPolicy is what it was: egress to the proxy pods only, no DNS, nothing else.
    const policy = fake.store.get('networkpolicies', 'corral', 'corral-workspaces') as unknown as { spec: { egress: unknown[] } }
    expect(policy.spec.egress).toEqual([{ to: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'corral' } } }], ports: [{ protocol: 'TCP', port: 7071 }] }])
  })

  it('mode cni: nothing in the pod holds a capability; the annotations tell the CNI plugin what to redirect', async () => {
    const r = runtime({ CORRAL_K8S_TRANSPARENT_EGRESS: 'cni' })
    expect((await r.check()).warnings.join(' ')).toMatch(/CNI plugin that installs the redirect rules/)
    const { pod } = await agentPodOf(r)
    expect(() => new Pod(pod as never).validate()).not.toThrow()
    expect(pod.spec.initContainers ?? []).toEqual([])
    expect(pod.metadata.annotations).toMatchObject({ [EGRESS_ANNOTATION.mode]: 'redirect', [EGRESS_ANNOTATION.port]: '15001', [EGRESS_ANNOTATION.exclude]: '10.96.0.12:7071' })
    expect(pod.spec.dnsConfig?.nameservers).toEqual(['127.0.0.1'])
    expect(privilegeProblems(pod)).toEqual([])
  })

  it('mode off (the default): no resolver, no egress container, HTTPS_PROXY only', async () => {
    const { pod } = await agentPodOf(runtime({}))
    expect(pod.spec.dnsPolicy).toBeUndefined()
    expect(pod.spec.initContainers).toBeUndefined()
    expect(pod.spec.containers.map((c) => c.name)).toEqual(['agent', 'keeper'])
  })

  it('a bad mode names its variable; a pod that would run a privileged container is never created', () => {
    expect(() => kubernetesSettingsFromEnv({ CORRAL_AGENT_IMAGE: 'x', CORRAL_K8S_TRANSPARENT_EGRESS: 'sidecar' }, DEFAULT_LIMITS)).toThrow(/CORRAL_K8S_TRANSPARENT_EGRESS must be off, init or cni/)
    const s = kubernetesSettingsFromEnv({ CORRAL_AGENT_IMAGE: 'x', CORRAL_K8S_TRANSPARENT_EGRESS: 'init' }, DEFAULT_LIMITS)
    const pod = agentPod(s, podName('ws_1', 'abcde'), 'ws_1', {}, { command: ['a'], proxyToken: 't', proxyUrl: 'http://10.96.0.12:7071', files: {}, env: {}, baseEnv: {}, stopGraceSeconds: 1 })
    expect(privilegeProblems(pod)).toEqual([])
    const relay = pod.spec.containers.find((c) => c.name === EGRESS_CONTAINER)!
    const tampered = { ...pod, spec: { ...pod.spec, containers: [...pod.spec.containers.filter((c) => c !== relay), { ...relay, securityContext: { ...relay.securityContext, capabilities: { drop: ['ALL'], add: ['NET_ADMIN'] } } }] } }
    expect(privilegeProblems(tampered)).toEqual(['egress: adds NET_ADMIN'])
    const root = { ...pod, spec: { ...pod.spec, containers: [{ ...relay, securityContext: { ...relay.securityContext, runAsUser: 0 } }] } }
    expect(privilegeProblems(root)).toEqual(['egress: may run as root'])
  })
})
