// The Kubernetes driver's face (docs/kubernetes.md "Runtime"). Loaded on demand by its
// registration (src/runtime/registry.ts): @kubernetes/client-node costs about half a second to
// load, which no other runtime should pay.
export { KubernetesRuntime, type AdoptedAgent, type KubernetesRuntimeOptions } from './kubernetes-runtime.js'
export { openKubeClient, type KubeClient } from './kube-client.js'
export {
  agentPod, agentSecret, dataClaim, keeperPod, workspacePolicy, claimName, podName, labelValue, objectStem, workspaceLabels,
  LABEL, POD_PATHS, POLICY_NAME, WORKSPACE_SELECTOR, type AgentPodSpec, type WorkspaceOwner,
} from './manifests.js'
export { kubernetesSettingsFromEnv, podResources, type KubernetesSettings, type PodResources } from './options.js'
export { EGRESS_ANNOTATION, EGRESS_CONTAINER, EGRESS_INIT_CONTAINER, EGRESS_KEY, egressRules, privilegeProblems } from './egress.js'
