// The seam every agent kind implements (docs/agent.md "Adding an agent kind"). An adapter knows
// one CLI: how to start it for a task (argv, environment, the resume flag) and how to read its
// structured output into corral's agent events. Everything else — taking tasks, the session
// file, spawning and stopping the CLI and its children, file changes, task_start/task_end,
// failure reasons — is the shared runner's (runner.ts), so every kind keeps the same contract.
import type { AgentTask, CliAgentKind, TaskStatus } from '../../contract/index.js'
import type { AgentEvent } from '../event-sink.js'
import type { ProviderKind } from '../model.js'

/** What an adapter is told to start the CLI for one task. */
export interface CliTaskContext {
  task: AgentTask
  /** argv prefix that runs the CLI: `[path]` for a native binary, `[node, path]` for a JavaScript entry. */
  cli: readonly string[]
  /** The workspace (/data), the CLI's working directory. */
  workspaceDir: string
  /**
   * This kind's own directory under /data (`.corral/<kind>`), created by the runner: the CLI's
   * home and config go here, so its session files are snapshotted, survive a restart and are
   * inherited by a fork — what makes `resume` work across agent processes.
   */
  stateDir: string
  /** The role's provider: its wire format, its base URL (reached through the proxy) and the model. */
  provider: ProviderKind
  baseUrl: string
  model: string
  /**
   * The CLI's own session: `resume` true — continue `id` (the CLI's documented resume flag); false —
   * start a new session under `id` (a UUID the runner chose, for CLIs that take one) or the CLI's
   * own id, which the translator then reports (`sessionId`).
   */
  session: { id: string; resume: boolean }
  /** The agent's environment: proxy variables (token in the URL), CORRAL_CA_FILE, SSL_CERT_FILE, … */
  env: Readonly<NodeJS.ProcessEnv>
}

/** How to run the CLI for one task. */
export interface CliInvocation {
  /** Full argv (starting with `ctx.cli`). */
  argv: string[]
  /** The CLI's environment, complete (the runner adds nothing): start from `ctx.env`. */
  env: Record<string, string>
  /** Written to the CLI's stdin, which is then closed; stdin is /dev/null without it. */
  stdin?: string
  /** Files written before the CLI starts (absolute paths under `ctx.stateDir`: its settings). */
  files?: Record<string, string>
}

/** What a translator read from the CLI's output about how the task went. */
export interface CliResult {
  status: TaskStatus
  /** The CLI's final answer, or its error. */
  summary: string
  /** A failure's message as the CLI gave it (the runner adds the exit code and names a proxy deny). */
  error?: string
}

/**
 * Reads the CLI's stdout one line at a time. Events carry no `task_id`; the runner posts them in
 * the order returned, and adds `file_change` events after each `tool_result`.
 */
export interface CliTranslator {
  line(text: string): AgentEvent[]
  /** The CLI's session id once it has said it (saved for the next task's resume). */
  sessionId(): string | undefined
  /** Model turns seen so far (task_end.iterations). */
  iterations(): number
  /** Token usage so far (task_end.usage). */
  usage(): { input_tokens: number; output_tokens: number }
  /** The outcome the CLI reported (its final result line); undefined when it reported none. */
  result(): CliResult | undefined
}

export interface AgentAdapter {
  kind: CliAgentKind
  /** Provider wire formats the CLI can speak; a role with another provider kind fails its task at once. */
  providers: readonly ProviderKind[]
  invocation(ctx: CliTaskContext): CliInvocation
  translator(ctx: CliTaskContext): CliTranslator
}
