// The agent kinds (docs/agent.md "Agent kinds"): one adapter per CLI, registered here by kind, and
// the entry the reference agent's process takes when CORRAL_AGENT_KIND names one.
import { isCliAgentKind, type CliAgentKind, type TaskOutcome } from '../../contract/index.js'
import type { AgentConfig } from '../config.js'
import type { EventSink } from '../event-sink.js'
import type { TaskSource } from '../task-source.js'
import { claudeCode } from './claude-code/index.js'
import { codex } from './codex/index.js'
import { geminiCli } from './gemini-cli/index.js'
import { opencode } from './opencode/index.js'
import { CliAgentRunner } from './runner.js'
import type { AgentAdapter } from './types.js'

export type { AgentAdapter, CliInvocation, CliResult, CliTaskContext, CliTranslator } from './types.js'
export { CliAgentRunner, outcome, policyDeny, type CliRunnerOptions } from './runner.js'

/** Every adapter, by kind; a kind without one fails its tasks with a clear reason. */
export const ADAPTERS: Partial<Record<CliAgentKind, AgentAdapter>> = {
  'claude-code': claudeCode,
  codex,
  'gemini-cli': geminiCli,
  opencode,
}

/** The CLI kind the environment names (CORRAL_AGENT_KIND), or undefined for the reference agent. */
export function agentKindFromEnv(env: NodeJS.ProcessEnv = process.env): CliAgentKind | undefined {
  const kind = env.CORRAL_AGENT_KIND
  if (kind === undefined || kind === '' || kind === 'corral') return undefined
  if (!isCliAgentKind(kind)) throw new Error(`corral agent is not configured: CORRAL_AGENT_KIND ${JSON.stringify(kind)} is not an agent kind`)
  return kind
}

/**
 * argv prefix of the kind's CLI: CORRAL_AGENT_CLI (set by the runtime to the mounted executable),
 * run with this node when CORRAL_AGENT_CLI_RUN is `node`.
 */
export function cliFromEnv(kind: CliAgentKind, env: NodeJS.ProcessEnv = process.env): string[] {
  const path = env.CORRAL_AGENT_CLI
  if (!path) throw new Error(`corral agent is not configured: CORRAL_AGENT_CLI is not set (the runtime mounts the ${kind} CLI and names it there)`)
  return env.CORRAL_AGENT_CLI_RUN === 'node' ? [process.execPath, path] : [path]
}

/** Runs tasks with the kind's CLI until the source is empty. */
export async function runCliAgent(kind: CliAgentKind, config: AgentConfig, source: TaskSource, sink: EventSink, signal?: AbortSignal): Promise<TaskOutcome[]> {
  const adapter = ADAPTERS[kind]
  if (!adapter) throw new Error(`the ${kind} agent kind has no adapter in this corral build`)
  const runner = new CliAgentRunner({
    adapter, cli: cliFromEnv(kind), workspaceDir: config.workspaceDir, provider: config.provider, baseUrl: config.baseUrl,
    model: config.model, sink, log: (l) => process.stderr.write(`${l}\n`),
  })
  return runner.runSession(source, signal)
}
