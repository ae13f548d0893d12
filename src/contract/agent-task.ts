// What the agent works on (the inbox's and `GET /tasks/next`'s wire shape, shared by the control
// plane that hands a task over and the agent that runs it): one task, with the role's settings already merged with the task's own
// overrides by whoever hands it over (the control plane, or a task file).

import type { Environment, ThinkingEffort } from './resources.js'

export { ENVIRONMENTS, THINKING_EFFORTS, type Environment, type ThinkingEffort } from './resources.js'

export interface AgentTask {
  id: string
  description: string
  /** Start with a fresh conversation, forgetting earlier tasks of this workspace. */
  reset_session?: boolean
  thinking_effort?: ThinkingEffort
  /** How many times the agent is nudged to go on when the model stops without calling `finish`. */
  max_continuations?: number
  /** Context size (tokens) above which the conversation is compacted into a summary. */
  max_context_tokens?: number
  environment?: Environment
  environment_description?: string
  /** Paths under /data of files uploaded with the task (usually /data/uploads/<task_id>/…). */
  uploads?: string[]
  metadata?: Record<string, unknown>
  /**
   * The task's own capability token, sent with a task handed to an agent that was started before
   * it (a warm pool member): the agent uses it from then on (docs/agent.md "Warm start").
   */
  proxy_token?: string
}

/** How a task ended, as the agent reports it (its `finish` tool, the task_end event). */
export const TASK_OUTCOME_STATUSES = ['completed', 'failed'] as const
export type TaskStatus = (typeof TASK_OUTCOME_STATUSES)[number]

export interface TaskOutcome {
  task_id: string
  status: TaskStatus
  /** Why a task failed: `model_error`, `iteration_limit`, `context_limit`, `agent_error`, or the model's own. */
  reason?: string
  summary: string
  iterations: number
  usage: { input_tokens: number; output_tokens: number }
}

/** Role-level settings; a task's own values win. */
export interface AgentDefaults {
  thinking_effort: ThinkingEffort
  max_continuations: number
  /** 0 = never compact. */
  max_context_tokens: number
  environment: Environment
  environment_description: string
}
