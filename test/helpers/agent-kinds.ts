// What the agent-kind suites (test/e2e/agent-kinds-*) share: the runtime they run on, where the
// agent CLIs are, a policy that denies every model call, the waits on a workspace's tasks, and a
// look at the host's processes for the command a cancelled task started.
import { execFileSync } from 'node:child_process'
import { expect } from 'vitest'
import { bwrapAvailable } from '../runtime/helpers.js'
import type { Stack } from './serve.js'

/** bubblewrap where it works here, else the process runtime. */
export const AGENT_RUNTIME = (await bwrapAvailable()) ? 'local' : 'process'

// The CLIs are optional dependencies of corral; where this install lacks them, a node_modules
// folder that holds them (docs/agent.md "Agent kinds").
export const AGENT_CLI_DIR = process.env.CORRAL_TEST_AGENT_CLI_DIR

/** Allows only a GET of `modelsPath` on 127.0.0.1, which no CLI makes: its model calls are denied (no_match). */
export function denyModelCaps(modelsPath: string): string {
  return `- name: model
  type: http
  allow:
    - name: models
      domains: ["127.0.0.1"]
      methods: [GET]
      paths: [${modelsPath}]
`
}

/** Whether a process whose command line is exactly `command` runs on the host (a distinctive sleep). */
export function hostRuns(command: string): boolean {
  try {
    return execFileSync('pgrep', ['-f', `^${command}$`], { encoding: 'utf8' }).trim() !== ''
  } catch {
    return false
  }
}

export interface TaskWaits {
  /** The workspace once it is idle with `count` tasks. */
  idleAfter(id: string, count: number): Promise<any>
  /** A task once it is completed, failed or cancelled; a CLI's start on a loaded machine can take long. */
  taskDone(id: string): Promise<any>
  /** A follow-up task in the suite's workspace (accepted: 202); its id. */
  followUp(description: string, extra?: Record<string, unknown>): Promise<string>
}

/** The waits over the suite's stack and workspace, both read when called (set in beforeAll and the first test). */
export function taskWaits(stack: () => Stack, wsId: () => string, { idleMs = 60_000 }: { idleMs?: number } = {}): TaskWaits {
  return {
    idleAfter: (id, count) => stack().until(async () => {
      const w = (await stack().api('GET', `/workspaces/${id}`)).body
      return w.state === 'idle' && w.task_count === count && w
    }, `workspace ${id} idle after ${count} tasks`, idleMs),
    taskDone: (id) => stack().until(async () => {
      const t = (await stack().api('GET', `/tasks/${id}`)).body
      return ['completed', 'failed', 'cancelled'].includes(t.status) && t
    }, `task ${id}`, 120_000),
    followUp: async (description, extra = {}) => {
      const r = await stack().api('POST', `/workspaces/${wsId()}/tasks`, { description, ...extra })
      expect(r.status, JSON.stringify(r.body)).toBe(202)
      return r.body.task_id
    },
  }
}
