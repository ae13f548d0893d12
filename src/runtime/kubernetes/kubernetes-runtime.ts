// The `kubernetes` driver (docs/kubernetes.md "Runtime"): one pod at a time per workspace in the
// configured namespace, /data on a PersistentVolumeClaim that outlives its pods, the agent's token,
// CA and inbox in a Secret, egress only to the proxy Service (one NetworkPolicy for the namespace).
// An agent runs as the `agent` container of a pod whose `keeper` container holds /data for what
// comes after it (uploads, snapshots over exec + tar); a pod with the keeper alone holds /data
// between agents when one is needed. The driver follows its pods through a watch (pod-watch.ts).
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { readFile } from 'node:fs/promises'
import { setTimeout as sleep } from 'node:timers/promises'
import type { V1Pod } from '@kubernetes/client-node'
import { RuntimeError } from '../errors.js'
import type { ForkSource, WorkspaceDriver } from '../driver.js'
import type {
  AgentLaunch, AgentProcess, DriverCapabilities, ProvisionSpec, RunningAgent, RuntimeCheck, RuntimeOptions, SnapshotRecord, WorkspaceHandle, WorkspacePhase,
} from '../runtime.js'
import { AgentTable, agentEnd, agentRunning, workspaceOf } from './agents.js'
import { apiMessage, openKubeClient, statusCode, tolerate, type KubeClient } from './kube-client.js'
import { KubeVolume } from './kube-volume.js'
import {
  AGENT_CONTAINER, agentPod, agentSecret, ANNOTATION, claimName, dataClaim, keeperPod, LABEL, podName, POOL, WORKSPACE_SELECTOR, workspaceLabels, workspacePolicy, type WorkspaceOwner,
} from './manifests.js'
import { podResources, type KubernetesSettings } from './options.js'
import { PodWatch } from './pod-watch.js'
import { followPodLog } from './pod-logs.js'
import { podPacks } from './pod-packs.js'
import { claimObject, claimTargets } from './warm-claims.js'
import { cniVerdict, probeCni } from './cni-probe.js'
import { ProxyService } from './proxy-service.js'
import { privilegeProblems } from './egress.js'

export interface KubernetesRuntimeOptions extends RuntimeOptions {
  settings: KubernetesSettings
  /** A client to use instead of one from the settings' kubeconfig (tests). */
  client?: KubeClient
}

/** A workspace's agent found running in the cluster by adopt() (the contract's RunningAgent). */
export type AdoptedAgent = RunningAgent

export class KubernetesRuntime implements WorkspaceDriver {
  readonly kind = 'kubernetes' as const
  readonly isolated = true
  /** Pods outlive serve (adopt), warm members are labelled objects (claimWarm), /data is a claim. */
  readonly capabilities: DriverCapabilities = { adoption: this, warmClaims: this, hostLogs: null, dataOnHost: false, uidPerWorkspace: true }
  readonly #o: KubernetesRuntimeOptions
  readonly #s: KubernetesSettings
  readonly #client: KubeClient
  readonly #agents = new AgentTable((pod, over, since) => followPodLog(this.#client, { namespace: this.#s.namespace, pod, container: AGENT_CONTAINER }, { over, signal: this.#closing.signal, warn: (line) => this.#warn(line), ...(since ? { since } : {}) }))
  readonly #closing = new AbortController()
  readonly #owners = new Map<string, WorkspaceOwner>()
  readonly #starting = new Set<string>()
  readonly #proxy: ProxyService
  readonly #watch: PodWatch
  readonly #waiters = new Set<() => void>()

  constructor(options: KubernetesRuntimeOptions) {
    this.#o = options
    this.#s = options.settings
    this.#client = options.client ?? openKubeClient(options.settings)
    this.#proxy = new ProxyService(this.#client, this.#s, options.proxy.port)
    this.#watch = new PodWatch(this.#client, {
      namespace: this.#s.namespace, selector: WORKSPACE_SELECTOR, warn: (line) => this.#warn(line),
      onChange: (change) => {
        this.#agents.onChange(change)
        for (const wake of [...this.#waiters]) wake()
      },
    })
  }

  /** The pod watch's counters (tests: a dropped watch was resumed, a 410 re-listed). */
  get watchStats(): Readonly<{ watches: number; lists: number }> {
    return this.#watch.stats
  }

  async check(): Promise<RuntimeCheck> {
    const problems: string[] = []
    const warnings: string[] = []
    try {
      await this.#client.core.listNamespacedPod({ namespace: this.#s.namespace, limit: 1 })
    } catch (err) {
      problems.push(`cannot list pods in namespace ${this.#s.namespace}: ${apiMessage(err)} (check the kubeconfig, the namespace and the Role of corral's service account)`)
      return { ok: false, problems, warnings }
    }
    try {
      const proxy = await this.#proxy.resolve()
      await this.#ensurePolicy(workspacePolicy(this.#s, proxy))
      warnings.push(...proxy.warnings)
    } catch (err) {
      problems.push(err instanceof RuntimeError ? err.message : `cannot set up the workspace NetworkPolicy: ${apiMessage(err)}`)
    }
    if (this.#s.transparentEgress === 'init') {
      warnings.push('kubernetes: transparent egress (CORRAL_K8S_TRANSPARENT_EGRESS=init) gives each agent pod an init container with NET_ADMIN: a namespace enforcing the PodSecurity level "restricted" refuses such pods (docs/kubernetes.md "Transparent egress and DNS")')
    } else if (this.#s.transparentEgress === 'cni') {
      warnings.push('kubernetes: transparent egress (CORRAL_K8S_TRANSPARENT_EGRESS=cni) relies on a CNI plugin that installs the redirect rules from the pod\'s corral.dev/* annotations; without one, lookups resolve and connections go nowhere (docs/kubernetes.md "Transparent egress and DNS")')
    }
    if (this.#s.networkPolicyCheck === 'off') {
      warnings.push('kubernetes: the CNI probe is off (CORRAL_K8S_NETWORK_POLICY_CHECK=off): workspace egress is limited by the NetworkPolicy corral-workspaces only where the CNI enforces it (docs/kubernetes.md "Runtime: network")')
    } else {
      const verdict = cniVerdict(await probeCni(this.#client), this.#s.networkPolicyCheck)
      warnings.push(...verdict.warnings)
      problems.push(...verdict.problems)
    }
    if (problems.length === 0) await this.#watch.start().catch((err: unknown) => problems.push(`cannot watch pods: ${apiMessage(err)}`))
    return { ok: problems.length === 0, problems, warnings }
  }

  async #ensurePolicy(policy: ReturnType<typeof workspacePolicy>): Promise<void> {
    const api = this.#client.networking
    const ns = this.#s.namespace
    for (let attempt = 0; attempt < 5; attempt++) {
      const current = await tolerate([404], () => api.readNamespacedNetworkPolicy({ name: policy.metadata.name, namespace: ns }))
      try {
        if (!current) await api.createNamespacedNetworkPolicy({ namespace: ns, body: policy })
        else await api.replaceNamespacedNetworkPolicy({ name: policy.metadata.name, namespace: ns, body: { ...policy, metadata: { ...policy.metadata, resourceVersion: current.metadata?.resourceVersion } } })
        return
      } catch (err) {
        // Another replica wrote it meanwhile (409 AlreadyExists or Conflict): read and try again.
        if (statusCode(err) !== 409) throw err
      }
    }
    throw new RuntimeError('runtime_unavailable', 'the NetworkPolicy corral-workspaces kept changing under corral (409 Conflict five times)')
  }

  async provision(spec: ProvisionSpec, fork: ForkSource): Promise<WorkspaceHandle> {
    await this.#watch.start()
    const id = spec.workspaceId
    const uid = spec.agentUid === undefined ? {} : { uid: spec.agentUid }
    if (spec.owner) this.#owners.set(id, { ...spec.owner, ...(spec.pooled ? { pool: POOL.warm } : {}), ...uid })
    const owner = await this.#owner(id)
    const created = await tolerate([409], () => this.#client.core.createNamespacedPersistentVolumeClaim({ namespace: this.#s.namespace, body: dataClaim(this.#s, id, owner) }))
    const volume = this.volume(id)
    let restoredFrom: SnapshotRecord | null = null
    if (spec.forkFrom) {
      restoredFrom = await fork.at(spec.forkFrom.workspaceId, spec.forkFrom.taskCount)
      // Restored once, into the claim this call made: a re-provision after a crash keeps /data.
      if (restoredFrom && created) await fork.restore(restoredFrom, volume)
    }
    return { workspaceId: id, volume, restoredFrom }
  }

  volume(workspaceId: string): KubeVolume {
    return new KubeVolume(this.#client, workspaceId, claimName(workspaceId), async () => ({ namespace: this.#s.namespace, pod: await this.#holder(workspaceId) }))
  }

  /** Who owns a workspace: as provisioned by this process, else from its claim's labels. */
  async #owner(workspaceId: string): Promise<WorkspaceOwner> {
    const known = this.#owners.get(workspaceId)
    // A member warm here may have been claimed through another replica: its claim's labels say.
    if (known && known.pool !== POOL.warm) return known
    const claim = await tolerate([404], () => this.#client.core.readNamespacedPersistentVolumeClaim({ name: claimName(workspaceId), namespace: this.#s.namespace }))
    if (!claim && known) return known
    const labels = claim?.metadata?.labels ?? {}
    const pool = labels[LABEL.pool] === POOL.warm || labels[LABEL.pool] === POOL.claimed ? { pool: labels[LABEL.pool] as WorkspaceOwner['pool'] } : {}
    const uid = Number(claim?.metadata?.annotations?.[ANNOTATION.uid] ?? NaN)
    return {
      ...(labels[LABEL.org] ? { orgId: labels[LABEL.org] } : {}), ...(labels[LABEL.role] ? { roleId: labels[LABEL.role] } : {}), ...pool,
      ...(Number.isInteger(uid) && uid > 0 ? { uid } : known?.uid === undefined ? {} : { uid: known.uid }),
    }
  }

  /**
   * WorkspaceRuntime.claimWarm: the member's claim first (its identity: whoever relabels it wins),
   * then each of its live pods; a pod deleted meanwhile is skipped, the watch reports its end.
   */
  async claimWarm(workspaceId: string, claimant: string): Promise<boolean> {
    await this.#watch.start()
    const targets = claimTargets(this.#client, this.#s.namespace)
    if ((await claimObject(targets.claim(claimName(workspaceId)), claimant)) !== 'won') return false
    for (const pod of this.#podsOf(workspaceId)) {
      if (pod.metadata?.deletionTimestamp) continue
      if ((await claimObject(targets.pod(pod.metadata!.name!), claimant)) === 'lost') return false
    }
    const owner = await this.#owner(workspaceId)
    this.#owners.set(workspaceId, { ...owner, pool: POOL.claimed })
    return true
  }

  provisioned(workspaceId: string): Promise<boolean> {
    return this.#claimExists(workspaceId)
  }

  async #claimExists(workspaceId: string): Promise<boolean> {
    return (await tolerate([404], () => this.#client.core.readNamespacedPersistentVolumeClaim({ name: claimName(workspaceId), namespace: this.#s.namespace }))) !== undefined
  }

  #podsOf(workspaceId: string): V1Pod[] {
    return this.#watch.pods().filter((p) => workspaceOf(p) === workspaceId)
  }

  /** A running pod of the workspace whose keeper can be exec'd into; a keeper pod is started when none. */
  async #holder(workspaceId: string): Promise<string> {
    await this.#watch.start()
    const usable = this.#podsOf(workspaceId).find((p) => !p.metadata?.deletionTimestamp && p.status?.phase === 'Running'
      && p.status.containerStatuses?.some((s) => s.name === 'keeper' && s.state?.running))
    if (usable?.metadata?.name) return usable.metadata.name
    if (!(await this.#claimExists(workspaceId))) throw new RuntimeError('workspace_not_found', `workspace ${workspaceId} is not provisioned`)
    await this.#deletePods(workspaceId)
    const name = podName(workspaceId, suffix())
    await this.#client.core.createNamespacedPod({ namespace: this.#s.namespace, body: keeperPod(this.#s, name, workspaceId, await this.#owner(workspaceId)) })
    let seen = false
    await this.#until(name, (pod) => {
      if (pod?.status?.phase === 'Running') return true
      if ((seen && !pod) || pod?.status?.phase === 'Failed') throw new RuntimeError('runtime_unavailable', `the keeper pod ${name} of workspace ${workspaceId} ended before it ran`)
      seen ||= pod !== undefined
      return false
    })
    return name
  }

  /** Waits for the watch to show `name` in a state `done` accepts, within the pod start timeout. */
  async #until(name: string, done: (pod: V1Pod | undefined) => boolean): Promise<void> {
    const deadline = Date.now() + this.#s.podStartTimeoutMs
    for (;;) {
      if (done(this.#watch.get(name))) return
      const left = deadline - Date.now()
      if (left <= 0) {
        await this.#deletePod(name)
        throw new RuntimeError('runtime_unavailable', `pod ${name} did not start within ${this.#s.podStartTimeoutMs} ms (CORRAL_K8S_POD_START_TIMEOUT_MS)`)
      }
      await new Promise<void>((resolve) => {
        const wake = (): void => {
          this.#waiters.delete(wake)
          clearTimeout(timer)
          resolve()
        }
        const timer = setTimeout(wake, Math.min(left, 1000))
        this.#waiters.add(wake)
      })
    }
  }

  async #deletePod(name: string, graceSeconds?: number): Promise<void> {
    await tolerate([404], () => this.#client.core.deleteNamespacedPod({ name, namespace: this.#s.namespace, ...(graceSeconds === undefined ? {} : { gracePeriodSeconds: graceSeconds }) }))
    await tolerate([404], () => this.#client.core.deleteNamespacedSecret({ name, namespace: this.#s.namespace }))
  }

  async #deletePods(workspaceId: string): Promise<void> {
    await Promise.all(this.#podsOf(workspaceId).map((p) => this.#deletePod(p.metadata!.name!)))
  }

  async startAgent(workspaceId: string, launch: AgentLaunch): Promise<AgentProcess> {
    if (this.#agents.get(workspaceId) || this.#starting.has(workspaceId)) throw new RuntimeError('agent_running', `an agent already runs in workspace ${workspaceId}`)
    if (launch.command.length === 0) throw new RuntimeError('runtime_unavailable', 'empty agent command')
    this.#starting.add(workspaceId)
    try {
      await this.#watch.start()
      if (!(await this.#claimExists(workspaceId))) throw new RuntimeError('workspace_not_found', `workspace ${workspaceId} is not provisioned`)
      return await this.#start(workspaceId, launch)
    } finally {
      this.#starting.delete(workspaceId)
    }
  }

  async #start(workspaceId: string, launch: AgentLaunch): Promise<AgentProcess> {
    const proxy = await this.#proxy.resolve()
    const owner = await this.#owner(workspaceId)
    const caPem = this.#o.caCertPath ? await readFile(this.#o.caCertPath, 'utf8').catch(() => undefined) : undefined
    const name = podName(workspaceId, suffix())
    const packs = podPacks(launch)
    const spec = {
      command: packs.command, packs: packs.mounts, packEnv: packs.env, resources: podResources(this.#s.resources, launch.resources), proxyToken: launch.proxyToken, proxyUrl: proxy.url, ...(caPem ? { caPem } : {}),
      // An agent CLI is where the agent image has corral's own dependencies: the same path as on
      // this host, like the agent command itself (docs/kubernetes.md).
      files: launch.files ?? {}, env: { ...launch.env, ...(launch.cli ? { CORRAL_AGENT_CLI: join(launch.cli.dir, launch.cli.entry), CORRAL_AGENT_CLI_RUN: launch.cli.run } : {}) },
      baseEnv: Object.fromEntries(Object.entries(launch.baseEnv ?? {}).filter(([k]) => !k.startsWith('CORRAL_'))),
      stopGraceSeconds: Math.ceil((this.#o.stopGraceMs ?? 5000) / 1000),
    }
    await this.#deletePods(workspaceId)
    await this.#client.core.createNamespacedSecret({ namespace: this.#s.namespace, body: agentSecret(this.#s, name, workspaceId, owner, spec) })
    const body = agentPod(this.#s, name, workspaceId, owner, spec)
    // Nothing that runs beside the agent may hold a privilege (only an init container, gone by then).
    const privileged = privilegeProblems(body)
    if (privileged.length > 0) throw new RuntimeError('runtime_unavailable', `the agent pod of workspace ${workspaceId} would run privileged: ${privileged.join('; ')}`)
    const agent = this.#agents.track(workspaceId, name, `pod/${this.#s.namespace}/${name}/agent`)
    try {
      await this.#client.core.createNamespacedPod({ namespace: this.#s.namespace, body })
    } catch (err) {
      agent.exit({ code: null, signal: null })
      await this.#deletePod(name)
      throw new RuntimeError('runtime_unavailable', `the agent pod of workspace ${workspaceId} was refused: ${apiMessage(err)}`)
    }
    // The token's Secret goes with the agent: nothing after it (keeper, snapshots) needs it.
    void agent.process.exited.then(() => tolerate([404], () => this.#client.core.deleteNamespacedSecret({ name, namespace: this.#s.namespace })).catch(() => {}))
    const started = await Promise.race([agent.running, sleep(this.#s.podStartTimeoutMs, 'timeout' as const, { ref: false })])
    if (started === 'timeout') {
      await this.#deletePod(name)
      agent.exit({ code: null, signal: 'SIGKILL' })
      throw new RuntimeError('runtime_unavailable', `the agent pod ${name} did not start within ${this.#s.podStartTimeoutMs} ms (CORRAL_K8S_POD_START_TIMEOUT_MS)`)
    }
    return agent.process
  }

  async stopAgent(workspaceId: string): Promise<void> {
    const agent = this.#agents.get(workspaceId)
    if (!agent) return
    const grace = Math.ceil((this.#o.stopGraceMs ?? 5000) / 1000)
    await tolerate([404], () => this.#client.core.deleteNamespacedPod({ name: agent.podName, namespace: this.#s.namespace, gracePeriodSeconds: grace }))
    const over = await Promise.race([agent.process.exited, sleep((grace + 10) * 1000, 'timeout' as const, { ref: false })])
    if (over === 'timeout') agent.exit({ code: null, signal: 'SIGKILL' })
    await tolerate([404], () => this.#client.core.deleteNamespacedSecret({ name: agent.podName, namespace: this.#s.namespace }))
  }

  /** The stop snapshot is taken: the keeper goes too; the claim holds /data for a restart. */
  async teardown(workspaceId: string): Promise<void> {
    await this.#deletePods(workspaceId)
  }

  async phase(workspaceId: string): Promise<{ phase: WorkspacePhase }> {
    if (this.#agents.get(workspaceId)) return { phase: 'running' }
    if (!(await this.#claimExists(workspaceId))) return { phase: 'absent' }
    return { phase: this.#podsOf(workspaceId).length > 0 ? 'ready' : 'stopped' }
  }

  /** The agent, the keeper and the claim go (docs/kubernetes.md "Runtime: storage retention"). */
  async release(workspaceId: string): Promise<void> {
    await this.stopAgent(workspaceId)
    await this.#deletePods(workspaceId)
    await tolerate([404], () => this.#client.core.deleteNamespacedPersistentVolumeClaim({ name: claimName(workspaceId), namespace: this.#s.namespace }))
  }

  async remove(workspaceId: string): Promise<void> {
    await this.release(workspaceId)
    this.#owners.delete(workspaceId)
  }

  /**
   * The agents running in the cluster for corral's workspaces (all, or those of `workspaceIds`),
   * followed from now on as if this process had started them: on start or when one replica takes
   * over another's workspaces, their tasks go on undisturbed.
   */
  async adopt(workspaceIds?: readonly string[]): Promise<AdoptedAgent[]> {
    await this.#watch.start()
    const wanted = workspaceIds ? new Set(workspaceIds) : undefined
    const adopted: AdoptedAgent[] = []
    for (const pod of this.#watch.pods()) {
      const id = workspaceOf(pod)
      if (!id || (wanted && !wanted.has(id)) || pod.metadata?.labels?.[LABEL.podKind] !== 'agent' || pod.metadata.deletionTimestamp) continue
      if (agentEnd(pod) || !agentRunning(pod)) continue
      const known = this.#agents.get(id)
      if (known) {
        adopted.push({ workspaceId: id, process: known.process })
        continue
      }
      // Its output is followed from now: what it wrote before, the replica that started it shipped.
      const agent = this.#agents.track(id, pod.metadata.name!, `pod/${this.#s.namespace}/${pod.metadata.name}/agent`, new Date())
      agent.markRunning()
      adopted.push({ workspaceId: id, process: agent.process })
    }
    return adopted
  }

  /** Stops watching; agent pods keep running (another replica, or the next start, adopts them). */
  async close(): Promise<void> {
    this.#watch.close()
    this.#closing.abort()
    for (const wake of [...this.#waiters]) wake()
  }

  #warn(line: string): void {
    ;(this.#o.warn ?? ((l: string) => process.stderr.write(`${l}\n`)))(line)
  }
}

function suffix(): string {
  return randomBytes(3).toString('hex').slice(0, 5)
}

export { workspaceLabels }
