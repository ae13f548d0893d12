// Every object the Kubernetes driver creates, validated against the official schemas
// (kubernetes-models: the OpenAPI schemas of Kubernetes 1.27 as JSON Schema validators), plus
// what those schemas cannot say: the security context, the labels, no secret in the pod spec.
import { describe, expect, it } from 'vitest'
import { PersistentVolumeClaim, Pod, Secret } from 'kubernetes-models/v1'
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1'
import { kubernetesSettingsFromEnv } from '../../../src/runtime/index.js'
import { agentPod, agentSecret, claimName, dataClaim, keeperPod, labelValue, podName, podResources, workspacePolicy } from '../../../src/runtime/kubernetes/index.js'
import { DEFAULT_LIMITS } from '../../../src/runtime/limits.js'

const settings = kubernetesSettingsFromEnv({ CORRAL_AGENT_IMAGE: 'ghcr.io/example/corral-agent:1', CORRAL_K8S_STORAGE_CLASS: 'fast' }, { ...DEFAULT_LIMITS, cpus: 2 })
const WS = 'ws_0193f2a1b2c3d4e5f60718293a4b5c6d'
const owner = { orgId: 'org_0193aa', roleId: 'role_0193bb' }
const spec = {
  command: ['node', '/app/dist/agent/main.js'], proxyToken: 'tok.secret.value', proxyUrl: 'http://10.96.0.12:7071', caPem: '-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n',
  files: { 'tasks.json': '[]' }, env: { CORRAL_MODEL: 'm', ANTHROPIC_NOTE: 'secret-ish' }, baseEnv: { PACK_FLAG: '1' }, stopGraceSeconds: 5,
}

describe('manifests', () => {
  it('the /data claim is a valid PersistentVolumeClaim with the storage class and size', () => {
    const claim = dataClaim(settings, WS, owner)
    expect(() => new PersistentVolumeClaim(claim as never).validate()).not.toThrow()
    expect(claim.spec.storageClassName).toBe('fast')
    expect(claim.spec.resources.requests.storage).toBe(`${DEFAULT_LIMITS.diskMb}Mi`)
    expect(claim.metadata.name).toBe(claimName(WS))
    expect(claim.metadata.labels).toMatchObject({ 'corral.dev/workspace': WS, 'corral.dev/org': owner.orgId, 'corral.dev/role': owner.roleId })
  })

  it('the agent pod is a valid Pod: restrictive security context, resources, no secret value in its spec', () => {
    const name = podName(WS, 'abcde')
    const pod = agentPod(settings, name, WS, owner, spec)
    expect(() => new Pod(pod as never).validate()).not.toThrow()
    expect(name.length).toBeLessThanOrEqual(63)
    expect(pod.spec.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } })
    expect(pod.spec.automountServiceAccountToken).toBe(false)
    for (const c of pod.spec.containers) {
      expect(c.securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } })
    }
    const agent = pod.spec.containers[0] as unknown as { resources: object; env: { name: string; valueFrom?: { secretKeyRef?: { name: string } } }[] }
    expect(agent.resources).toMatchObject({ limits: { cpu: '2', memory: `${DEFAULT_LIMITS.memoryMb}Mi`, 'ephemeral-storage': '1Gi' } })
    const text = JSON.stringify(pod)
    expect(text).not.toContain(spec.proxyToken)
    expect(text).not.toContain('secret-ish')
    const https = agent.env.find((e) => e.name === 'HTTPS_PROXY')
    expect(https?.valueFrom?.secretKeyRef?.name).toBe(name)
    expect(pod.spec.volumes.find((v) => v.name === 'data')).toEqual({ name: 'data', persistentVolumeClaim: { claimName: claimName(WS) } })
  })

  it("a role's resources go over the server's defaults; a default request above the role's lower limit is lowered to it", () => {
    const merged = podResources(settings.resources, { requests: { cpu: '1' }, limits: { cpu: '2', memory: '128Mi', 'ephemeral-storage': '8Gi' } })
    expect(merged).toEqual({
      requests: { cpu: '1', memory: '128Mi', 'ephemeral-storage': '256Mi' },
      limits: { cpu: '2', memory: '128Mi', 'ephemeral-storage': '8Gi' },
    })
    const pod = agentPod(settings, podName(WS, 'abcde'), WS, owner, { ...spec, resources: merged })
    expect(() => new Pod(pod as never).validate()).not.toThrow()
    expect(pod.spec.containers[0]!.resources).toEqual(merged)
    expect(podResources(settings.resources, undefined)).toBe(settings.resources)
  })

  it('the keeper pod and the Secret are valid', () => {
    expect(() => new Pod(keeperPod(settings, podName(WS, 'k1234'), WS, owner) as never).validate()).not.toThrow()
    const secret = agentSecret(settings, podName(WS, 'abcde'), WS, owner, spec)
    expect(() => new Secret(secret as never).validate()).not.toThrow()
    expect(secret.stringData['proxy-url']).toBe(`http://corral:${spec.proxyToken}@10.96.0.12:7071`)
    for (const key of Object.keys(secret.stringData)) expect(key).toMatch(/^[-._a-zA-Z0-9]+$/)
  })

  it('the NetworkPolicy is valid: no ingress, egress to the proxy pods on its port only (no DNS)', () => {
    const policy = workspacePolicy(settings, { selector: { 'app.kubernetes.io/name': 'corral' }, targetPort: 7071 })
    expect(() => new NetworkPolicy(policy as never).validate()).not.toThrow()
    expect(policy.spec.policyTypes).toEqual(['Ingress', 'Egress'])
    expect(policy.spec.ingress).toEqual([])
    expect(policy.spec.egress).toEqual([{ to: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'corral' } } }], ports: [{ protocol: 'TCP', port: 7071 }] }])
  })

  it('an id that is no label value becomes a stable hash', () => {
    expect(labelValue('_platform')).toMatch(/^h-[0-9a-f]{40}$/)
    expect(labelValue('_platform')).toBe(labelValue('_platform'))
    expect(labelValue(WS)).toBe(WS)
  })

  it('a bad setting names its variable', () => {
    expect(() => kubernetesSettingsFromEnv({}, DEFAULT_LIMITS)).toThrow(/CORRAL_AGENT_IMAGE/)
    expect(() => kubernetesSettingsFromEnv({ CORRAL_AGENT_IMAGE: 'x', CORRAL_K8S_CPU_REQUEST: 'lots' }, DEFAULT_LIMITS)).toThrow(/CORRAL_K8S_CPU_REQUEST/)
    expect(() => kubernetesSettingsFromEnv({ CORRAL_AGENT_IMAGE: 'x', CORRAL_K8S_NAMESPACE: 'Bad_NS' }, DEFAULT_LIMITS)).toThrow(/CORRAL_K8S_NAMESPACE/)
  })
})
