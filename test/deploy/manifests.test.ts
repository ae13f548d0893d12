// deploy/ rendered and checked (docs/kubernetes.md "What the manifests guarantee"): the base and
// the example overlay rendered by `kubectl kustomize` (Debian's kubernetes-client, installed by
// .ci/run; without kubectl outside CI the base's files are read directly), every object validated
// against the Kubernetes OpenAPI schemas (kubernetes-models), and the wiring between them checked:
// selectors, named ports, probes, the Secrets and ConfigMap the pods read, RBAC confined to the
// namespace, the drain fitting in the grace period.
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parseAllDocuments, parse } from 'yaml'
import { Deployment } from 'kubernetes-models/apps/v1'
import { ConfigMap, Namespace, Secret, Service, ServiceAccount } from 'kubernetes-models/v1'
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1'
import { Role, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1'

const DEPLOY = resolve(import.meta.dirname, '../../deploy')
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'apps/v1/Deployment': Deployment,
  'v1/ConfigMap': ConfigMap,
  'v1/Namespace': Namespace,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
}

type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string> }; [k: string]: unknown }

function kubectlAvailable(): boolean {
  const ok = spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0
  if (!ok && process.env.CORRAL_TEST_REQUIRE_KUBECTL === '1') throw new Error('kubectl is required (CORRAL_TEST_REQUIRE_KUBECTL=1) but not installed: apt-get install kubernetes-client')
  if (!ok) console.log('kubectl not installed: deploy/ is checked from the base files, without rendering the overlay')
  return ok
}
const kubectl = kubectlAvailable()

function render(dir: string): K8sObject[] {
  const res = spawnSync('kubectl', ['kustomize', join(DEPLOY, dir)], { encoding: 'utf8' })
  if (res.status !== 0) throw new Error(`kubectl kustomize ${dir} failed: ${res.stderr}`)
  return parseAllDocuments(res.stdout).map((d) => d.toJSON() as K8sObject).filter(Boolean)
}

/** The base without kustomize: its resources read as they are. */
function readBase(): K8sObject[] {
  const k = parse(readFileSync(join(DEPLOY, 'base/kustomization.yaml'), 'utf8')) as { resources: string[] }
  return k.resources.flatMap((f) => parseAllDocuments(readFileSync(join(DEPLOY, 'base', f), 'utf8')).map((d) => d.toJSON() as K8sObject))
}

const sets: Array<[string, () => K8sObject[], boolean]> = kubectl
  ? [['base (kubectl kustomize)', () => render('base'), false], ['overlays/example (kubectl kustomize)', () => render('overlays/example'), true]]
  : [['base (files)', readBase, false]]

describe.each(sets)('deploy/ %s', (_name, load, overlay) => {
  const objects = load()
  const one = <T>(kind: string, name?: string) => {
    const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name))
    expect(found, `${kind} ${name ?? ''}`).toHaveLength(1)
    return found[0] as unknown as T
  }

  it('every object is valid against the Kubernetes schemas; nothing is cluster-wide', () => {
    expect(objects.length).toBeGreaterThanOrEqual(8)
    for (const o of objects) {
      const Model = MODELS[`${o.apiVersion}/${o.kind}`]
      expect(Model, `${o.apiVersion} ${o.kind} has a schema here`).toBeDefined()
      expect(() => new Model!(o as never).validate(), `${o.kind}/${o.metadata.name}`).not.toThrow()
    }
    expect(objects.map((o) => o.kind)).not.toContain('ClusterRole')
    expect(objects.map((o) => o.kind)).not.toContain('ClusterRoleBinding')
  })

  it('the Deployment runs serve on both ports, probes /healthz (live) and /readyz (ready), and drains within its grace period', () => {
    const d = one<Deployment>('Deployment', 'corral')
    const pod = d.spec!.template.spec!
    const c = pod.containers.find((x) => x.name === 'corral')!
    expect(c.args?.[0]).toBe('serve')
    expect(c.args).toEqual(expect.arrayContaining(['--host', '0.0.0.0', '--port', '7070', '--proxy-port', '7071']))
    expect(c.ports?.map((p) => [p.name, p.containerPort])).toEqual([['api', 7070], ['proxy', 7071]])
    expect(c.livenessProbe?.httpGet).toMatchObject({ path: '/healthz', port: 'api' })
    expect(c.readinessProbe?.httpGet).toMatchObject({ path: '/readyz', port: 'api' })
    expect(c.startupProbe?.httpGet).toMatchObject({ path: '/healthz', port: 'api' })
    expect(c.securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } })
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } })
    expect(d.spec!.strategy?.rollingUpdate).toMatchObject({ maxUnavailable: 0 })
    // Replaced 30 s after its node stops answering (docs/kubernetes.md "When a node dies").
    for (const key of ['node.kubernetes.io/not-ready', 'node.kubernetes.io/unreachable']) {
      expect(pod.tolerations).toContainEqual({ key, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 30 })
    }
    // The drain delay (ConfigMap) and serve's own drain (at most 20 s) fit before SIGKILL.
    const cm = one<ConfigMap>('ConfigMap', 'corral')
    const delayS = Number(cm.data!.CORRAL_DRAIN_DELAY_MS) / 1000
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(delayS + 20)
    expect(cm.data!.CORRAL_RUNTIME).toBe('kubernetes')
  })

  it('config comes from the ConfigMap and the Secret corral-config; the CA from corral-ca, into the data dir', () => {
    const pod = one<Deployment>('Deployment', 'corral').spec!.template.spec!
    const c = pod.containers[0]!
    expect(c.envFrom).toEqual([{ configMapRef: { name: 'corral' } }, { secretRef: { name: 'corral-config' } }])
    const mounts = Object.fromEntries((c.volumeMounts ?? []).map((m) => [m.mountPath, m]))
    expect(c.args).toEqual(expect.arrayContaining(['--data-dir', '/var/lib/corral']))
    expect(mounts['/var/lib/corral/ca.pem']).toMatchObject({ name: 'ca', subPath: 'ca.pem', readOnly: true })
    expect(mounts['/var/lib/corral/ca-key.pem']).toMatchObject({ name: 'ca', subPath: 'ca-key.pem', readOnly: true })
    const volumes = Object.fromEntries((pod.volumes ?? []).map((v) => [v.name, v]))
    expect(volumes.ca?.secret?.secretName).toBe('corral-ca')
    expect(volumes.data?.emptyDir).toBeDefined()
    for (const m of c.volumeMounts ?? []) expect(volumes[m.name], m.name).toBeDefined()
    const secrets = objects.filter((o) => o.kind === 'Secret')
    if (secrets.length > 0) {
      const config = one<Secret>('Secret', 'corral-config')
      expect(Object.keys(config.stringData ?? {})).toEqual(expect.arrayContaining(['CORRAL_DB_URL', 'CORRAL_MASTER_KEY', 'CORRAL_PACK_REGISTRY']))
      expect(Object.keys(one<Secret>('Secret', 'corral-ca').stringData ?? {}).sort()).toEqual(['ca-key.pem', 'ca.pem'])
    }
  })

  it('the Services and the PodDisruptionBudget select the pods; the proxy Service is the one the runtime points workspaces at', () => {
    const d = one<Deployment>('Deployment', 'corral')
    const labels = d.spec!.template.metadata!.labels!
    const ports = new Set(d.spec!.template.spec!.containers[0]!.ports!.map((p) => p.name))
    const selects = (selector: Record<string, string>) => Object.entries(selector).every(([k, v]) => labels[k] === v)
    expect(selects(d.spec!.selector.matchLabels!)).toBe(true)
    for (const name of ['corral-api', 'corral-proxy']) {
      const s = one<Service>('Service', name)
      expect(selects(s.spec!.selector!), name).toBe(true)
      for (const p of s.spec!.ports!) expect(ports.has(String(p.targetPort)), `${name} → ${p.targetPort}`).toBe(true)
    }
    const proxy = one<Service>('Service', 'corral-proxy')
    expect(one<ConfigMap>('ConfigMap', 'corral').data!.CORRAL_K8S_PROXY_SERVICE).toBe(`corral-proxy:${proxy.spec!.ports![0]!.port}`)
    const pdb = one<PodDisruptionBudget>('PodDisruptionBudget', 'corral')
    expect(selects(pdb.spec!.selector!.matchLabels!)).toBe(true)
    expect(pdb.spec!.maxUnavailable).toBe(1)
  })

  it('RBAC: a Role in the namespace with exactly what the runtime needs, bound to the pods\' ServiceAccount', () => {
    const role = one<Role>('Role', 'corral')
    const rules = role.rules ?? []
    const can = (group: string, resource: string, verb: string) => rules.some((r) => r.apiGroups?.includes(group) && r.resources?.includes(resource) && r.verbs.includes(verb))
    for (const verb of ['get', 'list', 'watch', 'create', 'delete']) {
      expect(can('', 'pods', verb), `pods ${verb}`).toBe(true)
      expect(can('', 'persistentvolumeclaims', verb), `pvcs ${verb}`).toBe(true)
      expect(can('', 'secrets', verb), `secrets ${verb}`).toBe(true)
      expect(can('networking.k8s.io', 'networkpolicies', verb), `networkpolicies ${verb}`).toBe(true)
    }
    expect(can('', 'pods/exec', 'create')).toBe(true)
    expect(rules.flatMap((r) => r.resources ?? []).sort()).toEqual(['networkpolicies', 'persistentvolumeclaims', 'pods', 'pods/exec', 'pods/log', 'secrets'])
    expect(rules.flatMap((r) => r.verbs)).not.toContain('*')
    const binding = one<RoleBinding>('RoleBinding', 'corral')
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'corral' })
    const sa = one<Deployment>('Deployment', 'corral').spec!.template.spec!.serviceAccountName
    // kustomize fills in the subject's namespace: the Role's own.
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: sa, ...(role.metadata?.namespace ? { namespace: role.metadata.namespace } : {}) }])
    one<ServiceAccount>('ServiceAccount', sa)
  })

  // The base leaves namespace, image and replica count to the overlay.
  if (overlay) it('the overlay puts every object in one namespace and sets image and replicas', () => {
    const ns = one<Namespace>('Namespace').metadata!.name
    for (const o of objects.filter((x) => x.kind !== 'Namespace')) expect(o.metadata.namespace, `${o.kind}/${o.metadata.name}`).toBe(ns)
    const d = one<Deployment>('Deployment', 'corral')
    expect(d.spec!.replicas).toBe(3)
    expect(d.spec!.template.spec!.containers[0]!.image).toBe('registry.example.com/corral/corral:0.1.0')
  })
})
