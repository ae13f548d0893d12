// Which agent pods this driver follows and when each agent is over, read from pod changes only
// (pod-watch.ts): the agent container terminated (its exit code; OOMKilled is the memory limit),
// the pod failed (evicted: no exit code), or the pod is gone (deleted behind corral's back).
import type { V1Pod } from '@kubernetes/client-node'
import type { AgentExit, AgentProcess } from '../runtime.js'
import { AGENT_CONTAINER, LABEL } from './manifests.js'
import type { PodChange } from './pod-watch.js'

export interface TrackedAgent {
  workspaceId: string
  podName: string
  process: AgentProcess
  /** Resolves once the agent container runs (or the pod is over first: then with its exit). */
  running: Promise<AgentExit | null>
  exit(e: AgentExit): void
  markRunning(): void
}

/** The agent's end as a pod shows it, or undefined while it still runs (or has not started). */
export function agentEnd(pod: V1Pod | undefined, type?: PodChange['type']): AgentExit | undefined {
  if (!pod || type === 'DELETED') return { code: null, signal: 'SIGKILL' }
  if (pod.status?.phase === 'Failed' || pod.status?.phase === 'Succeeded') {
    const term = containerState(pod)?.terminated
    if (pod.status.reason === 'Evicted' || !term) return { code: null, signal: 'SIGKILL' }
    return exitOf(term)
  }
  const term = containerState(pod)?.terminated
  return term ? exitOf(term) : undefined
}

function exitOf(term: { exitCode: number; reason?: string }): AgentExit {
  return { code: term.exitCode, signal: null, ...(term.reason === 'OOMKilled' ? { limitHit: 'memory' as const } : {}) }
}

export function agentRunning(pod: V1Pod): boolean {
  return pod.status?.phase === 'Running' && containerState(pod)?.running !== undefined
}

function containerState(pod: V1Pod) {
  return pod.status?.containerStatuses?.find((s) => s.name === AGENT_CONTAINER)?.state
}

export function workspaceOf(pod: V1Pod): string | undefined {
  return pod.metadata?.annotations?.['corral.dev/workspace-id'] ?? pod.metadata?.labels?.[LABEL.workspace]
}

/** The agent container's output of a pod, followed until `over` (pod-logs.ts); `since` for an adopted agent. */
export type OutputOf = (podName: string, over: Promise<AgentExit>, since?: Date) => AsyncIterable<string>

/** The agents followed, by workspace; settled from the pod watch. */
export class AgentTable {
  readonly #byWorkspace = new Map<string, TrackedAgent>()
  readonly #outputOf: OutputOf | undefined

  constructor(outputOf?: OutputOf) {
    this.#outputOf = outputOf
  }

  track(workspaceId: string, podName: string, logPath: string, since?: Date): TrackedAgent {
    let resolveExit!: (e: AgentExit) => void
    const exited = new Promise<AgentExit>((r) => (resolveExit = r))
    let resolveRunning!: (e: AgentExit | null) => void
    const running = new Promise<AgentExit | null>((r) => (resolveRunning = r))
    let over = false
    const agent: TrackedAgent = {
      workspaceId, podName, running,
      process: { workspaceId, pid: 0, exited, logPath, ...(this.#outputOf ? { output: () => this.#outputOf!(podName, exited, since) } : {}) },
      exit: (e) => {
        if (over) return
        over = true
        if (this.#byWorkspace.get(workspaceId) === agent) this.#byWorkspace.delete(workspaceId)
        resolveRunning(e)
        resolveExit(e)
      },
      markRunning: () => resolveRunning(null),
    }
    this.#byWorkspace.set(workspaceId, agent)
    return agent
  }

  get(workspaceId: string): TrackedAgent | undefined {
    return this.#byWorkspace.get(workspaceId)
  }

  all(): TrackedAgent[] {
    return [...this.#byWorkspace.values()]
  }

  /** A pod changed: settles the agent it carries when that agent is over. */
  onChange(change: PodChange): void {
    const name = change.pod.metadata?.name
    const ws = workspaceOf(change.pod)
    const agent = ws ? this.#byWorkspace.get(ws) : undefined
    if (!agent || agent.podName !== name) return
    const end = agentEnd(change.pod, change.type)
    if (end) agent.exit(end)
    else if (agentRunning(change.pod)) agent.markRunning()
  }
}
