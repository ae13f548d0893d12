// What the Kubernetes driver is configured with (docs/kubernetes.md "Runtime: configuration"):
// serve's flags and CORRAL_K8S_* variables, read once. A bad value stops serve with a message
// naming it, like every other setting of serve's.
import { readFileSync } from 'node:fs'
import { RESOURCE_NAMES, quantityValue, type RoleResources } from '../../contract/index.js'
import type { WorkspaceLimits } from '../limits.js'

/** What start-up does without a CNI that enforces NetworkPolicy (cni-probe.ts). */
export const NETWORK_POLICY_CHECKS = ['warn', 'require', 'off'] as const
export type NetworkPolicyCheck = (typeof NETWORK_POLICY_CHECKS)[number]

/** How a workspace pod's tools that ignore HTTPS_PROXY reach the proxy (egress.ts). */
export const TRANSPARENT_EGRESS_MODES = ['off', 'init', 'cni'] as const
export type TransparentEgressMode = (typeof TRANSPARENT_EGRESS_MODES)[number]

/** Requests and limits of a workspace's agent container, Kubernetes quantities (`500m`, `2Gi`). */
export interface PodResources {
  requests: { cpu: string; memory: string; 'ephemeral-storage': string }
  limits: { cpu: string; memory: string; 'ephemeral-storage': string }
}

export interface KubernetesSettings {
  /** Namespace of every workspace pod, claim, secret and policy (CORRAL_K8S_NAMESPACE; default serve's own pod's namespace, else `corral`). */
  namespace: string
  /** A kubeconfig file (CORRAL_K8S_KUBECONFIG, else KUBECONFIG); unset: in-cluster config, else ~/.kube/config. */
  kubeconfig?: string
  /** The kubeconfig context to use (CORRAL_K8S_CONTEXT); unset: its current context. */
  context?: string
  /** Storage class of the /data claims (CORRAL_K8S_STORAGE_CLASS); unset: the cluster's default class. */
  storageClass?: string
  /** Size of each /data claim (CORRAL_K8S_DATA_SIZE), default from CORRAL_WORKSPACE_DISK_MB, else 10Gi. */
  dataSize: string
  /** The Service in front of corral's proxy (CORRAL_K8S_PROXY_SERVICE, `name` or `name:port`, default `corral-proxy`). */
  proxyService: { name: string; port?: number }
  /**
   * Used when the Service cannot be read (no `get services` in the Role): the Service's address
   * from the service-link variables Kubernetes gives serve's own pod (`<NAME>_SERVICE_HOST`/`_PORT`)
   * and the proxy pods' labels (CORRAL_K8S_PROXY_SELECTOR, default deploy/'s).
   */
  proxyFallback: { host?: string; port?: number; selector: Record<string, string> }
  /** Image of the agent container (CORRAL_AGENT_IMAGE); it carries `tar`, `sleep`, `du` and the agent. */
  agentImage: string
  /** Pull policy of the agent image (CORRAL_K8S_IMAGE_PULL_POLICY, default IfNotPresent). */
  imagePullPolicy: 'Always' | 'IfNotPresent' | 'Never'
  resources: PodResources
  /** uid and gid the containers run as (CORRAL_K8S_RUN_AS_UID, default 1000); never 0. */
  runAsUid: number
  /** How long a pod may take to be running before the start fails (CORRAL_K8S_POD_START_TIMEOUT_MS, default 120000). */
  podStartTimeoutMs: number
  /**
   * What start-up does when it cannot find a CNI that enforces NetworkPolicy
   * (CORRAL_K8S_NETWORK_POLICY_CHECK): `warn` (default) says so loudly, `require` refuses the
   * runtime, `off` skips the probe (cni-probe.ts).
   */
  networkPolicyCheck: NetworkPolicyCheck
  /**
   * Transparent egress for workspace pods (CORRAL_K8S_TRANSPARENT_EGRESS): `off` (default:
   * HTTPS_PROXY only), `init` (the redirect rules installed by an init container with NET_ADMIN
   * alone) or `cni` (installed by the node's CNI plugin from the pod's annotations).
   */
  transparentEgress: TransparentEgressMode
  /** Image of the egress-init container (CORRAL_K8S_EGRESS_INIT_IMAGE, default the agent image); it needs `nft`. */
  egressInitImage: string
}

export const DEFAULT_NAMESPACE = 'corral'
export const DEFAULT_PROXY_SERVICE = 'corral-proxy'
/** The labels of deploy/'s corral pods (deploy/base/deployment.yaml). */
export const DEFAULT_PROXY_SELECTOR = 'app.kubernetes.io/name=corral,app.kubernetes.io/component=control-plane'

const QUANTITY = /^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$/
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/

// long-function: one flat reading of every variable, each checked where it is read
export function kubernetesSettingsFromEnv(env: NodeJS.ProcessEnv, limits: WorkspaceLimits): KubernetesSettings {
  const problems: string[] = []
  const text = (name: string): string | undefined => {
    const v = env[name]?.trim()
    return v ? v : undefined
  }
  const quantity = (name: string, fallback: string | undefined): string | undefined => {
    const v = text(name) ?? fallback
    if (v !== undefined && !QUANTITY.test(v)) problems.push(`${name} must be a Kubernetes quantity (like 500m, 2Gi), got ${JSON.stringify(v)}`)
    return v
  }
  const integer = (name: string, fallback: number, min: number): number => {
    const raw = text(name)
    if (raw === undefined) return fallback
    const n = Number(raw)
    if (!Number.isInteger(n) || n < min) problems.push(`${name} must be a whole number ≥ ${min}, got ${JSON.stringify(raw)}`)
    return n
  }
  const namespace = text('CORRAL_K8S_NAMESPACE') ?? ownNamespace(env) ?? DEFAULT_NAMESPACE
  if (!DNS_LABEL.test(namespace)) problems.push(`CORRAL_K8S_NAMESPACE must be a DNS label, got ${JSON.stringify(namespace)}`)
  const proxyService = parseService(text('CORRAL_K8S_PROXY_SERVICE') ?? DEFAULT_PROXY_SERVICE, problems)
  const linkName = proxyService.name.toUpperCase().replaceAll('-', '_')
  const linkPort = Number(env[`${linkName}_SERVICE_PORT`])
  const proxyFallback = {
    ...(text(`${linkName}_SERVICE_HOST`) ? { host: text(`${linkName}_SERVICE_HOST`)! } : {}),
    ...(Number.isInteger(linkPort) && linkPort > 0 ? { port: linkPort } : {}),
    selector: parseSelector(text('CORRAL_K8S_PROXY_SELECTOR') ?? DEFAULT_PROXY_SELECTOR, problems),
  }
  const agentImage = text('CORRAL_AGENT_IMAGE') ?? ''
  if (!agentImage) problems.push('CORRAL_AGENT_IMAGE must name the agent image (with --runtime kubernetes)')
  const pull = text('CORRAL_K8S_IMAGE_PULL_POLICY') ?? 'IfNotPresent'
  if (!['Always', 'IfNotPresent', 'Never'].includes(pull)) problems.push(`CORRAL_K8S_IMAGE_PULL_POLICY must be Always, IfNotPresent or Never, got ${JSON.stringify(pull)}`)
  const policyCheck = text('CORRAL_K8S_NETWORK_POLICY_CHECK') ?? 'warn'
  if (!(NETWORK_POLICY_CHECKS as readonly string[]).includes(policyCheck)) problems.push(`CORRAL_K8S_NETWORK_POLICY_CHECK must be warn, require or off, got ${JSON.stringify(policyCheck)}`)
  const egress = text('CORRAL_K8S_TRANSPARENT_EGRESS') ?? 'off'
  if (!(TRANSPARENT_EGRESS_MODES as readonly string[]).includes(egress)) problems.push(`CORRAL_K8S_TRANSPARENT_EGRESS must be off, init or cni, got ${JSON.stringify(egress)}`)
  // A container without a CPU or memory limit can starve its node's other pods: where the
  // workspace limits say "unlimited" (0), the cluster still gets a bound (docs/kubernetes.md).
  const memoryLimit = limits.memoryMb > 0 ? `${limits.memoryMb}Mi` : quantity('CORRAL_K8S_MEMORY_LIMIT', '4Gi')!
  const cpuLimit = limits.cpus > 0 ? String(limits.cpus) : quantity('CORRAL_K8S_CPU_LIMIT', '2')!
  const resources: PodResources = {
    requests: {
      cpu: quantity('CORRAL_K8S_CPU_REQUEST', '100m')!,
      memory: quantity('CORRAL_K8S_MEMORY_REQUEST', '256Mi')!,
      'ephemeral-storage': quantity('CORRAL_K8S_EPHEMERAL_REQUEST', '256Mi')!,
    },
    limits: {
      cpu: cpuLimit,
      memory: memoryLimit,
      'ephemeral-storage': quantity('CORRAL_K8S_EPHEMERAL_LIMIT', '1Gi')!,
    },
  }
  const settings: KubernetesSettings = {
    namespace,
    ...(text('CORRAL_K8S_KUBECONFIG') ?? text('KUBECONFIG') ? { kubeconfig: (text('CORRAL_K8S_KUBECONFIG') ?? text('KUBECONFIG'))! } : {}),
    ...(text('CORRAL_K8S_CONTEXT') ? { context: text('CORRAL_K8S_CONTEXT')! } : {}),
    ...(text('CORRAL_K8S_STORAGE_CLASS') ? { storageClass: text('CORRAL_K8S_STORAGE_CLASS')! } : {}),
    dataSize: quantity('CORRAL_K8S_DATA_SIZE', limits.diskMb > 0 ? `${limits.diskMb}Mi` : '10Gi')!,
    proxyService,
    proxyFallback,
    agentImage,
    imagePullPolicy: pull as KubernetesSettings['imagePullPolicy'],
    resources,
    runAsUid: integer('CORRAL_K8S_RUN_AS_UID', 1000, 1),
    podStartTimeoutMs: integer('CORRAL_K8S_POD_START_TIMEOUT_MS', 120_000, 1000),
    networkPolicyCheck: policyCheck as NetworkPolicyCheck,
    transparentEgress: egress as TransparentEgressMode,
    egressInitImage: text('CORRAL_K8S_EGRESS_INIT_IMAGE') ?? agentImage,
  }
  if (problems.length > 0) throw new Error(problems.join('; '))
  return settings
}

function parseSelector(raw: string, problems: string[]): Record<string, string> {
  const out: Record<string, string> = {}
  for (const term of raw.split(',').map((t) => t.trim()).filter(Boolean)) {
    const m = /^([A-Za-z0-9./_-]+)=([A-Za-z0-9._-]*)$/.exec(term)
    if (!m) problems.push(`CORRAL_K8S_PROXY_SELECTOR must be key=value pairs separated by commas, got ${JSON.stringify(raw)}`)
    else out[m[1]!] = m[2]!
  }
  return out
}

function parseService(raw: string, problems: string[]): { name: string; port?: number } {
  const [name = '', port] = raw.split(':')
  if (!DNS_LABEL.test(name)) problems.push(`CORRAL_K8S_PROXY_SERVICE must be a Service name (optionally :port), got ${JSON.stringify(raw)}`)
  if (port === undefined) return { name }
  const n = Number(port)
  if (!Number.isInteger(n) || n < 1 || n > 65535) problems.push(`CORRAL_K8S_PROXY_SERVICE port must be 1-65535, got ${JSON.stringify(port)}`)
  return { name, port: n }
}

/** The namespace of the pod serve runs in (its service account's), when it runs in a cluster. */
function ownNamespace(env: NodeJS.ProcessEnv): string | undefined {
  if (!env.KUBERNETES_SERVICE_HOST) return undefined
  try {
    return readFileSync('/var/run/secrets/kubernetes.io/serviceaccount/namespace', 'utf8').trim() || undefined
  } catch {
    return undefined
  }
}

/**
 * The agent container's resources: the role's (docs/roles.md "Resources") over the server's. A
 * default request above the role's lower limit is lowered to it, so a request never exceeds its
 * limit (the API server would refuse the pod).
 */
export function podResources(defaults: PodResources, role: RoleResources | undefined): PodResources {
  if (!role) return defaults
  const limits: Record<string, string> = { ...defaults.limits, ...role.limits }
  const requests: Record<string, string> = { ...defaults.requests }
  for (const name of RESOURCE_NAMES) {
    const own = role.requests?.[name]
    const limit = limits[name]
    if (own !== undefined) requests[name] = own
    else if (requests[name] !== undefined && limit !== undefined && (quantityValue(requests[name]!) ?? 0) > (quantityValue(limit) ?? Infinity)) requests[name] = limit
  }
  return { requests: requests as PodResources['requests'], limits: limits as PodResources['limits'] }
}
