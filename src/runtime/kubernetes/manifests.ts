// Every object the Kubernetes driver creates, built here and nowhere else (docs/kubernetes.md
// "Runtime: what corral creates"): the /data claim, the workspace pod (agent or keeper only), its
// Secret (token, CA, inbox, environment) and the namespace's NetworkPolicy. Pure functions: the
// test suite validates each against the official schemas (test/runtime/kubernetes/manifests.test.ts).
import { createHash } from 'node:crypto'
import { egressPodParts } from './egress.js'
import type { KubernetesSettings, PodResources } from './options.js'

export const LABEL = {
  managedBy: 'app.kubernetes.io/managed-by',
  component: 'corral.dev/component',
  workspace: 'corral.dev/workspace',
  org: 'corral.dev/org',
  role: 'corral.dev/role',
  /** `agent` (runs an agent beside the keeper) or `keeper` (holds /data only: uploads, snapshots, restores). */
  podKind: 'corral.dev/pod-kind',
  /** Warm pool members only: `warm` until a claim makes it `claimed` (warm-claims.ts). */
  pool: 'corral.dev/pool',
} as const
export const POOL = { warm: 'warm', claimed: 'claimed' } as const
export const ANNOTATION = {
  workspaceId: 'corral.dev/workspace-id',
  /** The workspace's own uid (WorkspaceOwner.uid), on its claim: every replica's pods run as it. */
  uid: 'corral.dev/uid',
  /** Who claimed a warm pool member (the claimant the lifecycle names: the claiming task or creator). */
  claimedBy: 'corral.dev/claimed-by',
} as const
export const MANAGED_BY = 'corral'
export const WORKSPACE_COMPONENT = 'workspace'
export const POLICY_NAME = 'corral-workspaces'

/** Paths inside the pod (the same the local sandbox uses, docs/runtime.md). */
export const POD_PATHS = { data: '/data', inbox: '/run/corral/inbox', caDir: '/run/corral/ca', ca: '/run/corral/ca/ca.crt', tmp: '/tmp', packs: '/packs' } as const
export const AGENT_CONTAINER = 'agent'
export const KEEPER_CONTAINER = 'keeper'
/** Secret keys: the proxy token and proxy URLs, the CA, the inbox files (`inbox.<name>`), the environment (`env.<NAME>`). */
const KEY = { token: 'proxy-token', proxyUrl: 'proxy-url', ca: 'ca.crt' } as const

/** Who a workspace belongs to: its pods and claim carry these as labels. */
export interface WorkspaceOwner {
  orgId?: string
  roleId?: string
  /** A warm pool member's state (its `corral.dev/pool` label); unset for an ordinary workspace. */
  pool?: (typeof POOL)[keyof typeof POOL]
  /** The workspace's own uid and gid (ProvisionSpec.agentUid; the claim's `corral.dev/uid` annotation); unset: the settings' runAsUid. */
  uid?: number
}

/** A Kubernetes object name for a workspace id: `ws_0193…` → `ws-0193…` (DNS-1123, lower case). */
export function objectStem(workspaceId: string): string {
  const stem = workspaceId.toLowerCase().replace(/[^a-z0-9-]/g, '-').replace(/^-+|-+$/g, '')
  if (stem.length > 0 && stem.length <= 40) return stem
  return `w-${createHash('sha256').update(workspaceId).digest('hex').slice(0, 32)}`
}

export const claimName = (workspaceId: string): string => `corral-data-${objectStem(workspaceId)}`
export const podName = (workspaceId: string, suffix: string): string => `corral-${objectStem(workspaceId)}-${suffix}`

/** A label value: the id itself when it is one, else a stable hash (an org id like `_platform`). */
export function labelValue(value: string): string {
  if (/^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/.test(value)) return value
  return `h-${createHash('sha256').update(value).digest('hex').slice(0, 40)}`
}

export function workspaceLabels(workspaceId: string, owner: WorkspaceOwner): Record<string, string> {
  return {
    [LABEL.managedBy]: MANAGED_BY,
    [LABEL.component]: WORKSPACE_COMPONENT,
    [LABEL.workspace]: labelValue(workspaceId),
    ...(owner.orgId ? { [LABEL.org]: labelValue(owner.orgId) } : {}),
    ...(owner.roleId ? { [LABEL.role]: labelValue(owner.roleId) } : {}),
    ...(owner.pool ? { [LABEL.pool]: owner.pool } : {}),
  }
}

/** The selector of every pod of corral's workspaces in the namespace (the watch, adopt). */
export const WORKSPACE_SELECTOR = `${LABEL.managedBy}=${MANAGED_BY},${LABEL.component}=${WORKSPACE_COMPONENT}`

export function dataClaim(s: KubernetesSettings, workspaceId: string, owner: WorkspaceOwner) {
  return {
    apiVersion: 'v1', kind: 'PersistentVolumeClaim',
    metadata: {
      name: claimName(workspaceId), namespace: s.namespace, labels: workspaceLabels(workspaceId, owner),
      annotations: { 'corral.dev/workspace-id': workspaceId, ...(owner.uid === undefined ? {} : { [ANNOTATION.uid]: String(owner.uid) }) },
    },
    spec: {
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: s.dataSize } },
      ...(s.storageClass ? { storageClassName: s.storageClass } : {}),
    },
  }
}

/** What one agent pod runs: argv, the token, the proxy (a cluster IP, no DNS needed), files, environment. */
export interface AgentPodSpec {
  command: readonly string[]
  proxyToken: string
  /** `http://<cluster IP>:<port>` of the proxy Service. */
  proxyUrl: string
  caPem?: string
  files: Readonly<Record<string, string>>
  /** corral's variables over the role's (secret: they go through the Secret). */
  env: Readonly<Record<string, string>>
  /** A pack's own environment, beneath corral's. */
  baseEnv: Readonly<Record<string, string>>
  stopGraceSeconds: number
  /** The agent container's requests and limits (podResources); the server's defaults when unset. */
  resources?: PodResources
  /** Packs mounted read-only at /packs/<name>: image volumes of their OCI images by digest. */
  packs?: readonly { name: string; imageRef: string }[]
  /** The pack variables (CORRAL_PACKS, CORRAL_PACKS_DIR, CORRAL_PACK_DIR), plain: no secret in them. */
  packEnv?: Readonly<Record<string, string>>
}

export function agentSecret(s: KubernetesSettings, name: string, workspaceId: string, owner: WorkspaceOwner, spec: AgentPodSpec) {
  const withToken = new URL(spec.proxyUrl)
  withToken.username = 'corral'
  withToken.password = spec.proxyToken
  const data: Record<string, string> = {
    [KEY.token]: spec.proxyToken,
    [KEY.proxyUrl]: withToken.toString().replace(/\/$/, ''),
    ...(spec.caPem ? { [KEY.ca]: spec.caPem } : {}),
  }
  for (const [file, content] of Object.entries(spec.files)) data[`inbox.${file}`] = content
  for (const [k, v] of Object.entries({ ...spec.baseEnv, ...spec.env })) data[`env.${k}`] = v
  Object.assign(data, egressPodParts(s, name, spec.proxyUrl, CONTAINER_SECURITY, SECRET_FILE_MODE)?.secretData)
  return {
    apiVersion: 'v1', kind: 'Secret', type: 'Opaque',
    metadata: { name, namespace: s.namespace, labels: workspaceLabels(workspaceId, owner) },
    stringData: data,
  }
}

const CONTAINER_SECURITY = {
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  runAsNonRoot: true,
  privileged: false,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
}

/** The pod runs as the workspace's own uid (one per workspace), its claim's files given to that gid. */
function podSecurity(s: KubernetesSettings, owner: WorkspaceOwner) {
  const uid = owner.uid ?? s.runAsUid
  return { runAsNonRoot: true, runAsUser: uid, runAsGroup: uid, fsGroup: uid, seccompProfile: { type: 'RuntimeDefault' } }
}

const dataMounts = [{ name: 'data', mountPath: POD_PATHS.data }, { name: 'tmp', mountPath: POD_PATHS.tmp }]

/** The keeper: holds /data for uploads, snapshots (exec + tar) and restores; idles otherwise. */
function keeperContainer(s: KubernetesSettings) {
  return {
    name: KEEPER_CONTAINER, image: s.agentImage, imagePullPolicy: s.imagePullPolicy,
    command: ['sleep', 'infinity'], workingDir: POD_PATHS.data,
    // Bounded like every container; a snapshot's tar and an upload run here (exec), hence the CPU headroom.
    resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '500m', memory: '64Mi', 'ephemeral-storage': '64Mi' } },
    securityContext: CONTAINER_SECURITY,
    volumeMounts: dataMounts,
  }
}

function basePod(s: KubernetesSettings, name: string, workspaceId: string, owner: WorkspaceOwner, kind: 'agent' | 'keeper') {
  return {
    apiVersion: 'v1', kind: 'Pod',
    metadata: { name, namespace: s.namespace, labels: { ...workspaceLabels(workspaceId, owner), [LABEL.podKind]: kind }, annotations: { 'corral.dev/workspace-id': workspaceId } },
    spec: {
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      securityContext: podSecurity(s, owner),
    },
  }
}

const volumeBase = (workspaceId: string) => [
  { name: 'data', persistentVolumeClaim: { claimName: claimName(workspaceId) } },
  { name: 'tmp', emptyDir: { sizeLimit: '256Mi' } },
]

export function keeperPod(s: KubernetesSettings, name: string, workspaceId: string, owner: WorkspaceOwner) {
  const base = basePod(s, name, workspaceId, owner, 'keeper')
  return { ...base, spec: { ...base.spec, terminationGracePeriodSeconds: 1, containers: [keeperContainer(s)], volumes: volumeBase(workspaceId) } }
}

// long-function: the agent pod reads best as the one manifest it is
export function agentPod(s: KubernetesSettings, name: string, workspaceId: string, owner: WorkspaceOwner, spec: AgentPodSpec) {
  const fromSecret = (envName: string, key: string) => ({ name: envName, valueFrom: { secretKeyRef: { name, key } } })
  const plain: Record<string, string> = {
    HOME: POD_PATHS.data,
    LANG: 'C.UTF-8',
    CORRAL_WORKSPACE_ID: workspaceId,
    CORRAL_WORKSPACE_DIR: POD_PATHS.data,
    CORRAL_PROXY_URL: spec.proxyUrl,
    CORRAL_INBOX: POD_PATHS.inbox,
    CORRAL_STOP_GRACE_MS: String(spec.stopGraceSeconds * 1000),
    ...spec.packEnv,
    ...(spec.caPem ? { NODE_EXTRA_CA_CERTS: POD_PATHS.ca, CORRAL_CA_FILE: POD_PATHS.ca, SSL_CERT_FILE: POD_PATHS.ca, CURL_CA_BUNDLE: POD_PATHS.ca, REQUESTS_CA_BUNDLE: POD_PATHS.ca, GIT_SSL_CAINFO: POD_PATHS.ca } : {}),
  }
  const secretNames = Object.keys({ ...spec.baseEnv, ...spec.env }).filter((k) => !Object.hasOwn(plain, k) && !PROXY_VARS.includes(k) && k !== 'CORRAL_PROXY_TOKEN')
  const env = [
    ...Object.entries(plain).map(([k, value]) => ({ name: k, value })),
    ...secretNames.sort().map((k) => fromSecret(k, `env.${k}`)),
    ...PROXY_VARS.map((k) => fromSecret(k, KEY.proxyUrl)),
    fromSecret('CORRAL_PROXY_TOKEN', KEY.token),
  ]
  const inboxItems = Object.keys(spec.files).sort().map((file) => ({ key: `inbox.${file}`, path: file }))
  const base = basePod(s, name, workspaceId, owner, 'agent')
  const egress = egressPodParts(s, name, spec.proxyUrl, CONTAINER_SECURITY, SECRET_FILE_MODE)
  return {
    ...base,
    metadata: { ...base.metadata, annotations: { ...base.metadata.annotations, ...egress?.annotations } },
    spec: {
      ...base.spec,
      ...(egress
        ? { dnsPolicy: egress.dnsPolicy, dnsConfig: egress.dnsConfig, securityContext: { ...base.spec.securityContext, sysctls: egress.sysctls }, initContainers: egress.initContainers }
        : {}),
      terminationGracePeriodSeconds: spec.stopGraceSeconds,
      containers: [
        {
          name: AGENT_CONTAINER, image: s.agentImage, imagePullPolicy: s.imagePullPolicy,
          command: [...spec.command], workingDir: POD_PATHS.data, env,
          resources: spec.resources ?? s.resources,
          securityContext: CONTAINER_SECURITY,
          volumeMounts: [
            ...dataMounts,
            { name: 'inbox', mountPath: POD_PATHS.inbox, readOnly: true },
            ...(spec.caPem ? [{ name: 'ca', mountPath: POD_PATHS.caDir, readOnly: true }] : []),
            ...(spec.packs ?? []).map((p, i) => ({ name: `pack-${i}`, mountPath: `${POD_PATHS.packs}/${p.name}`, readOnly: true })),
          ],
        },
        keeperContainer(s),
        ...(egress ? [egress.container] : []),
      ],
      volumes: [
        ...volumeBase(workspaceId),
        ...(egress ? [egress.volume] : []),
        // Readable by the pod's user alone: the kubelet gives the files to fsGroup (podSecurity), which
        // the agent's user is in, adding the group read bit; nobody else reads the inbox or the CA.
        { name: 'inbox', secret: { secretName: name, defaultMode: SECRET_FILE_MODE, items: inboxItems } },
        ...(spec.caPem ? [{ name: 'ca', secret: { secretName: name, defaultMode: SECRET_FILE_MODE, items: [{ key: KEY.ca, path: 'ca.crt' }] } }] : []),
        // An image volume (Kubernetes ≥ 1.33, feature ImageVolume): the kubelet pulls the pack's
        // image by digest and mounts its filesystem read-only (docs/kubernetes.md "Runtime: warm pools and packs").
        ...(spec.packs ?? []).map((p, i) => ({ name: `pack-${i}`, image: { reference: p.imageRef, pullPolicy: 'IfNotPresent' } })),
      ],
    },
  }
}

/** The mode of every file corral mounts from a Secret. */
export const SECRET_FILE_MODE = 0o400

const PROXY_VARS = ['HTTPS_PROXY', 'HTTP_PROXY', 'https_proxy', 'http_proxy']

/**
 * One policy for the namespace's workspace pods: no ingress at all; egress only to the pods behind
 * the proxy Service, on the proxy's container port. No DNS: HTTPS_PROXY holds the Service's
 * cluster IP, and the proxy resolves upstream names itself.
 */
export function workspacePolicy(s: KubernetesSettings, proxy: { selector: Record<string, string>; targetPort: number }) {
  return {
    apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy',
    metadata: { name: POLICY_NAME, namespace: s.namespace, labels: { [LABEL.managedBy]: MANAGED_BY } },
    spec: {
      podSelector: { matchLabels: { [LABEL.managedBy]: MANAGED_BY, [LABEL.component]: WORKSPACE_COMPONENT } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      egress: [{ to: [{ podSelector: { matchLabels: proxy.selector } }], ports: [{ protocol: 'TCP', port: proxy.targetPort }] }],
    },
  }
}
