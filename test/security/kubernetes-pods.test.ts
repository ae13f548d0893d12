// What the Kubernetes driver's pods may take and show (docs/kubernetes.md "Runtime: what corral
// creates"): every container of every pod it makes has CPU and memory requests and limits (also
// where the workspace limits say "unlimited"), and every file it mounts from a Secret is readable
// by the pod's user alone — checked on the manifests (the official schemas, kubernetes-models)
// and, through the fake kubelet, by the agent itself as the pod's user.
import { mkdtempSync, chmodSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Pod } from 'kubernetes-models/v1'
import { kubernetesSettingsFromEnv } from '../../src/runtime/index.js'
import { agentPod, claimName, keeperPod, openKubeClient, podName, podResources, privilegeProblems } from '../../src/runtime/kubernetes/index.js'
import { DEFAULT_LIMITS } from '../../src/runtime/limits.js'
import { FakeKube } from '../helpers/fake-kube/index.js'
import { kubernetesRuntime, type KubernetesRuntimeUnderTest } from '../runtime/drivers.js'

const WS = 'ws_0193f2a1b2c3d4e5f60718293a4b5c6d'
const owner = { orgId: 'org_1', roleId: 'role_1' }
const spec = {
  command: ['node', 'agent.js'], proxyToken: 'tok', proxyUrl: 'http://10.96.0.12:7071', caPem: '-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n',
  files: { 'tasks.json': '[]' }, env: {}, baseEnv: {}, stopGraceSeconds: 5,
}

type Manifest = { spec: { securityContext: { runAsUser: number; fsGroup?: number }; containers: { name: string; resources: { requests?: Record<string, string>; limits?: Record<string, string> } }[]; volumes: Record<string, unknown>[] } }

/** Every pod shape the driver makes, under several server settings. */
function pods(): [string, Manifest][] {
  const shapes: [string, Manifest][] = []
  for (const [label, env, limits] of [
    ['default limits', {}, DEFAULT_LIMITS],
    ['CORRAL_WORKSPACE_CPUS=2', {}, { ...DEFAULT_LIMITS, cpus: 2 }],
    ['unlimited workspace memory and CPU', {}, { ...DEFAULT_LIMITS, cpus: 0, memoryMb: 0 }],
    ['CORRAL_K8S_CPU_LIMIT and CORRAL_K8S_MEMORY_LIMIT', { CORRAL_K8S_CPU_LIMIT: '750m', CORRAL_K8S_MEMORY_LIMIT: '1Gi' }, { ...DEFAULT_LIMITS, cpus: 0, memoryMb: 0 }],
  ] as const) {
    const s = kubernetesSettingsFromEnv({ CORRAL_AGENT_IMAGE: 'corral-agent:1', ...env }, limits)
    shapes.push([`keeper pod, ${label}`, keeperPod(s, podName(WS, 'k1234'), WS, owner) as unknown as Manifest])
    shapes.push([`agent pod, ${label}`, agentPod(s, podName(WS, 'a1234'), WS, owner, spec) as unknown as Manifest])
    shapes.push([`agent pod without a CA, ${label}`, agentPod(s, podName(WS, 'a1235'), WS, owner, { ...spec, caPem: undefined } as never) as unknown as Manifest])
    for (const mode of ['init', 'cni']) {
      const egress = kubernetesSettingsFromEnv({ CORRAL_AGENT_IMAGE: 'corral-agent:1', CORRAL_K8S_TRANSPARENT_EGRESS: mode, ...env }, limits)
      shapes.push([`agent pod with transparent egress (${mode}), ${label}`, agentPod(egress, podName(WS, 'a1237'), WS, owner, spec) as unknown as Manifest])
    }
    const role = podResources(s.resources, { limits: { memory: '512Mi' } })
    shapes.push([`agent pod with a role's resources, ${label}`, agentPod(s, podName(WS, 'a1236'), WS, owner, { ...spec, resources: role }) as unknown as Manifest])
  }
  return shapes
}

describe('Kubernetes workspace pods', () => {
  it.each(pods())('%s: valid, every container bounded in CPU and memory, every Secret file 0400 to the pod user', (_label, pod) => {
    expect(() => new Pod(pod as never).validate()).not.toThrow()
    for (const c of pod.spec.containers) {
      for (const resource of ['cpu', 'memory']) {
        expect(c.resources.requests?.[resource], `${c.name} ${resource} request`).toBeDefined()
        expect(c.resources.limits?.[resource], `${c.name} ${resource} limit`).toBeDefined()
      }
    }
    const secretVolumes = pod.spec.volumes.filter((v) => v.secret || v.projected)
    for (const v of secretVolumes) {
      const source = (v.secret ?? v.projected) as { defaultMode?: number; items?: { mode?: number }[] }
      expect(source.defaultMode, `${String(v.name)} defaultMode`).toBe(0o400)
      for (const item of source.items ?? []) if (item.mode !== undefined) expect(item.mode & 0o077).toBe(0)
    }
    // The kubelet gives Secret files to fsGroup: the pod's user must be in it to read them.
    if (secretVolumes.length > 0) expect(pod.spec.securityContext.fsGroup).toBeDefined()
  })

  // What the bubblewrap driver must hide inside the sandbox (a tun device the setup opened) has no
  // counterpart here: no host path or device reaches a pod, no container adds a capability once
  // init containers have exited, and the agent does not share a process namespace with the egress
  // container (whose descriptors it could otherwise reach through /proc/<pid>/fd).
  it.each(pods())('%s: no host path, no device, no shared process namespace, no capability beside the agent', (_label, pod) => {
    const spec = pod.spec as Manifest['spec'] & { shareProcessNamespace?: boolean; hostPID?: boolean; hostNetwork?: boolean }
    expect(spec.volumes.filter((v) => v.hostPath)).toEqual([])
    expect(spec.containers.flatMap((c) => (c as { volumeDevices?: unknown[] }).volumeDevices ?? [])).toEqual([])
    expect([spec.shareProcessNamespace, spec.hostPID, spec.hostNetwork].filter(Boolean)).toEqual([])
    expect(privilegeProblems(pod)).toEqual([])
  })
})

const AGENT = `{
  cat "$CORRAL_INBOX/tasks.json"; echo
  head -c 27 "$CORRAL_CA_FILE"; echo
  stat -c '%a' "$CORRAL_INBOX/tasks.json" "$CORRAL_CA_FILE"
} > out.txt 2>&1
`

describe('Secret files in a running workspace pod (fake kubelet)', () => {
  let fake: FakeKube
  let dir: string
  let runtime: KubernetesRuntimeUnderTest

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'corral-k8s-secret-modes-'))
    chmodSync(dir, 0o755) // the agent runs as the pod's user (as root: 1000) and reaches the kubelet's directories
    fake = await FakeKube.start({ root: join(dir, 'kubelet'), runAsPodUser: true })
    writeFileSync(join(dir, 'kubeconfig'), fake.kubeconfig())
    writeFileSync(join(dir, 'ca.pem'), '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n')
    fake.store.create('services', 'corral', {
      apiVersion: 'v1', kind: 'Service', metadata: { name: 'corral-proxy' },
      spec: { clusterIP: '127.0.0.1', selector: { 'app.kubernetes.io/name': 'corral' }, ports: [{ name: 'proxy', port: 7071, targetPort: 7071 }] },
    })
    const s = kubernetesSettingsFromEnv({ CORRAL_AGENT_IMAGE: 'corral-agent:test', CORRAL_K8S_KUBECONFIG: join(dir, 'kubeconfig') }, DEFAULT_LIMITS)
    runtime = kubernetesRuntime({ root: join(dir, 'runtime'), proxy: { host: '127.0.0.1', port: 1 }, caCertPath: join(dir, 'ca.pem'), settings: s, stopGraceMs: 1000, warn: () => {}, client: openKubeClient(s) })
  })

  afterAll(async () => {
    await runtime?.close()
    await fake?.close()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  it('the agent reads its inbox and the CA; neither is readable by anyone outside the pod user and its group', async () => {
    const id = 'ws_secretmodes'
    await runtime.provision({ workspaceId: id, owner })
    const proc = await runtime.startAgent(id, { command: ['sh', '-c', AGENT], proxyToken: 'tok', files: { 'tasks.json': '[{"id":"task_1"}]' } })
    const exit = await Promise.race([proc.exited, new Promise<'late'>((r) => setTimeout(() => r('late'), 10_000).unref())])
    expect(exit).toEqual({ code: 0, signal: null })
    const [tasks, ca, ...modes] = readFileSync(join(fake.kubelet.claimDir(claimName(id)), 'out.txt'), 'utf8').trim().split('\n')
    expect(tasks).toBe('[{"id":"task_1"}]')
    expect(ca).toBe('-----BEGIN CERTIFICATE-----')
    // As root the kubelet (and the fake) hands them to root:fsGroup with the group read bit: 440.
    expect(modes).toEqual(process.getuid?.() === 0 ? ['440', '440'] : ['400', '400'])
  })
})
