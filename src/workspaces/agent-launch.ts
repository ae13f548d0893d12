// What the controller hands the agent for one task: the environment (role and provider settings,
// docs/agent.md "Configuration") and the task itself (role defaults merged with the task's own
// overrides). Values come from the store at each task start, so a role edit applies to the next task.
import type { AgentTask } from '../contract/index.js'
import { CONTROL_HOST, isCliAgentKind } from '../contract/index.js'
import type { RoleConfig, TaskRecord } from '../store/index.js'
import type { AgentCliMount, AgentLaunch } from '../runtime/index.js'
import type { WorkspacePacks } from './packs.js'

export function agentEnv(role: RoleConfig): Record<string, string> {
  const env: Record<string, string> = {
    CORRAL_PROVIDER_KIND: role.provider_kind === 'openai' || role.provider_kind === 'gemini' ? role.provider_kind : 'anthropic',
    CORRAL_MODEL: role.model ?? '',
    CORRAL_ENVIRONMENT: role.environment,
    // Spelled out for agents other than corral's, which would not know the default.
    CORRAL_EVENTS_URL: `https://${CONTROL_HOST}`,
  }
  const base = role.provider_base_url ?? (role.provider_domain ? `https://${role.provider_domain}` : undefined)
  if (base) env.CORRAL_PROVIDER_BASE_URL = base
  if (role.environment_description) env.CORRAL_ENVIRONMENT_DESCRIPTION = role.environment_description
  if (role.thinking_effort) env.CORRAL_THINKING_EFFORT = role.thinking_effort
  if (role.max_continuations !== null) env.CORRAL_MAX_CONTINUATIONS = String(role.max_continuations)
  if (role.max_context_tokens !== null) env.CORRAL_MAX_CONTEXT_TOKENS = String(role.max_context_tokens)
  if (isCliAgentKind(role.agent_kind)) env.CORRAL_AGENT_KIND = role.agent_kind
  return env
}

/**
 * Which program runs and what it sees of the packs. A role whose agent kind is a CLI runs the
 * reference agent's entry as that CLI's adapter (CORRAL_AGENT_KIND, docs/agent.md "Agent kinds"),
 * with the CLI mounted; otherwise the agent of a pack when one of the role's packs provides it
 * (its `agent.env` beneath corral's variables), else the server-wide default.
 */
export function agentProgram(packs: WorkspacePacks, defaultCommand: readonly string[], cli?: AgentCliMount): Pick<AgentLaunch, 'command' | 'commandPack' | 'baseEnv' | 'packs' | 'cli'> {
  const mounts = packs.mounts.length ? { packs: packs.mounts } : {}
  if (cli) return { command: defaultCommand, cli, ...mounts }
  if (!packs.agent) return { command: defaultCommand, ...mounts }
  return { command: packs.agent.command, commandPack: packs.agent.pack, baseEnv: packs.agent.env, ...mounts }
}

/** The task as the agent reads it from `$CORRAL_INBOX/tasks.json`. */
export function agentTask(task: TaskRecord): AgentTask {
  const o = task.options
  return {
    id: task.id,
    description: task.description,
    ...(o.reset_session ? { reset_session: true } : {}),
    ...(o.thinking_effort ? { thinking_effort: o.thinking_effort as AgentTask['thinking_effort'] } : {}),
    ...(o.max_continuations !== undefined ? { max_continuations: o.max_continuations } : {}),
    ...(o.max_context_tokens !== undefined ? { max_context_tokens: o.max_context_tokens } : {}),
    ...(o.environment ? { environment: o.environment as AgentTask['environment'] } : {}),
    ...(task.uploads.length ? { uploads: task.uploads.map((name) => `/data/uploads/${task.id}/${name}`) } : {}),
    ...(task.metadata ? { metadata: task.metadata } : {}),
  }
}
