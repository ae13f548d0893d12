// The start-up probe of the cluster's network plugin (docs/kubernetes.md "Runtime: network"): the
// NetworkPolicy corral-workspaces is the only thing between an agent and the network, and only a
// CNI that enforces NetworkPolicy applies it. The API cannot prove enforcement; what can be checked
// is which network plugin's agents run in kube-system (a list of its pods, which needs
// `list pods` there — deploy/'s Role does not grant it). What is found decides a warning or, with
// CORRAL_K8S_NETWORK_POLICY_CHECK=require, a refusal.
import type { V1Pod } from '@kubernetes/client-node'
import { apiMessage, statusCode, type KubeClient } from './kube-client.js'
import type { NetworkPolicyCheck } from './options.js'


/** Where the plugins' node agents run. */
export const CNI_NAMESPACE = 'kube-system'

/**
 * Network plugins recognised by the labels or name prefix of their node agents' pods, and whether
 * they enforce NetworkPolicy as deployed by default. Order matters: the first match of a pod wins
 * (canal bundles flannel with calico's policy agent).
 */
const PLUGINS: readonly { name: string; enforces: boolean; labels: readonly [string, string][]; prefixes: readonly string[] }[] = [
  { name: 'canal', enforces: true, labels: [['k8s-app', 'canal']], prefixes: ['canal-'] },
  { name: 'calico', enforces: true, labels: [['k8s-app', 'calico-node']], prefixes: ['calico-node-'] },
  { name: 'cilium', enforces: true, labels: [['k8s-app', 'cilium']], prefixes: ['cilium-', 'anetd-'] },
  { name: 'antrea', enforces: true, labels: [['component', 'antrea-agent']], prefixes: ['antrea-agent-'] },
  { name: 'kube-router', enforces: true, labels: [['k8s-app', 'kube-router']], prefixes: ['kube-router-'] },
  { name: 'weave-net', enforces: true, labels: [['name', 'weave-net']], prefixes: ['weave-net-'] },
  { name: 'azure-npm', enforces: true, labels: [['k8s-app', 'azure-npm']], prefixes: ['azure-npm-'] },
  { name: 'flannel', enforces: false, labels: [['app', 'flannel']], prefixes: ['kube-flannel-'] },
  { name: 'kindnet', enforces: false, labels: [['app', 'kindnet']], prefixes: ['kindnet-'] },
  { name: 'aws-vpc-cni', enforces: false, labels: [['k8s-app', 'aws-node']], prefixes: ['aws-node-'] },
]

export interface CniFinding {
  /** Plugins whose node agents run (names from PLUGINS), enforcing first. */
  found: string[]
  /** Whether one of them enforces NetworkPolicy. */
  enforcing: boolean
  /** Why nothing could be told (RBAC, no such namespace), when the list failed. */
  unknown?: string
}

function pluginOf(pod: V1Pod): { name: string; enforces: boolean } | undefined {
  const labels = pod.metadata?.labels ?? {}
  const name = pod.metadata?.name ?? ''
  // The VPC CNI enforces policies only with its policy agent beside it (a container of aws-node).
  if (labels['k8s-app'] === 'aws-node' && pod.spec?.containers?.some((c) => c.name === 'aws-network-policy-agent')) return { name: 'aws-network-policy-agent', enforces: true }
  return PLUGINS.find((p) => p.labels.some(([k, v]) => labels[k] === v) || p.prefixes.some((prefix) => name.startsWith(prefix)))
}

/** Lists kube-system's pods once and names the network plugins whose agents run there. */
export async function probeCni(client: KubeClient): Promise<CniFinding> {
  let pods: V1Pod[]
  try {
    pods = (await client.core.listNamespacedPod({ namespace: CNI_NAMESPACE, limit: 1000 })).items
  } catch (err) {
    const code = statusCode(err)
    const why = code === 403 ? `corral may not list pods in ${CNI_NAMESPACE} (403 Forbidden: grant it a Role there to let it look)` : `listing pods in ${CNI_NAMESPACE} failed: ${apiMessage(err)}`
    return { found: [], enforcing: false, unknown: why }
  }
  const found = new Map<string, boolean>()
  for (const pod of pods) {
    const plugin = pluginOf(pod)
    if (plugin && !pod.metadata?.deletionTimestamp) found.set(plugin.name, plugin.enforces)
  }
  const names = [...found.keys()].sort((a, b) => Number(found.get(b)) - Number(found.get(a)) || a.localeCompare(b))
  return { found: names, enforcing: [...found.values()].some(Boolean) }
}

/** The probe's verdict as check() lines: a warning, or (with `require`) a problem that refuses the runtime. */
export function cniVerdict(finding: CniFinding, mode: NetworkPolicyCheck): { warnings: string[]; problems: string[] } {
  const how = 'docs/kubernetes.md "Runtime: network"'
  if (finding.enforcing) return { warnings: [], problems: [] }
  const line = finding.unknown
    ? `kubernetes: cannot tell whether the cluster's CNI enforces NetworkPolicy — ${finding.unknown}; workspace egress is limited by the NetworkPolicy corral-workspaces only where it does (${how})`
    : finding.found.length > 0
      ? `kubernetes: the cluster's CNI (${finding.found.join(', ')}) does not enforce NetworkPolicy: an agent that ignores HTTPS_PROXY reaches the network directly (${how})`
      : `kubernetes: no known CNI that enforces NetworkPolicy (Calico, Cilium, Antrea, …) runs in ${CNI_NAMESPACE}: workspace egress may not be limited to the proxy (${how})`
  if (mode === 'require') return { warnings: [], problems: [`${line}; refusing the runtime (CORRAL_K8S_NETWORK_POLICY_CHECK=require; set it to warn to run anyway)`] }
  return { warnings: [`WARNING ${line}`], problems: [] }
}
