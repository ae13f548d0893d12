// The reference agent's entry: wires configuration, model client, tools and event sink.
import { join } from 'node:path'
import { Agent } from './agent-loop.js'
import { AnthropicClient } from './anthropic.js'
import type { Dispatcher } from 'undici'
import { adoptProxyToken, type AgentConfig, configFromEnv, createDispatcher } from './config.js'
import { type EventSink, HttpEventSink, NdjsonEventSink } from './event-sink.js'
import type { ModelClient } from './model.js'
import { OpenAiClient } from './openai.js'
import type { TaskOutcome } from '../contract/index.js'
import { FileTaskSource, HttpTaskSource, type TaskSource } from './task-source.js'
import { Toolbox, toolboxOptionsFromEnv } from './tools.js'
import { agentKindFromEnv, runCliAgent } from './kinds/index.js'

export { Agent, type AgentOptions } from './agent-loop.js'
export { agentEnvironment, configFromEnv, createDispatcher, DEFAULT_EVENTS_URL, TASKS_FILE, type AgentConfig, type AgentLaunchSettings } from './config.js'
export { type AgentEvent, type EventSink, HttpEventSink, MemoryEventSink, NdjsonEventSink } from './event-sink.js'
export type { AgentDefaults, AgentTask, TaskOutcome } from '../contract/index.js'
export { FileTaskSource, HttpTaskSource, ListTaskSource, type TaskSource } from './task-source.js'

/** The conversation file inside the workspace: it survives stop and restart, and a fork inherits it. */
export const SESSION_FILE = '.corral/session.json'

export { ADAPTERS, CliAgentRunner, type AgentAdapter, type CliInvocation, type CliResult, type CliTaskContext, type CliTranslator } from './kinds/index.js'

/**
 * Runs the agent until its task source is empty. With CORRAL_AGENT_KIND naming a CLI, the tasks
 * are run by that CLI through its adapter (kinds/), with the same task source and event sink. Without an explicit source: the task file
 * (CORRAL_TASK_FILE, or tasks.json in CORRAL_INBOX) when configured, else the control plane's
 * `GET <events url>/tasks/next` through the proxy.
 */
export async function runAgent(config: AgentConfig, source?: TaskSource, sink?: EventSink, signal?: AbortSignal): Promise<TaskOutcome[]> {
  const dispatcher = createDispatcher(config)
  const kind = agentKindFromEnv()
  source = adoptTaskTokens(source ?? (config.taskFile
    ? new FileTaskSource(config.taskFile)
    : new HttpTaskSource(config.eventsUrl, dispatcher, signal ? { signal } : {})), dispatcher)
  try {
    if (kind) return await runCliAgent(kind, config, source, sink ?? new HttpEventSink(config.eventsUrl, dispatcher), signal)
    const common = { baseUrl: config.baseUrl, model: config.model, dispatcher, ...(config.apiKey ? { apiKey: config.apiKey } : {}) }
    const model: ModelClient = config.provider === 'openai' ? new OpenAiClient(common) : new AnthropicClient(common)
    const agent = new Agent({
      model,
      tools: new Toolbox(config.workspaceDir, toolboxOptionsFromEnv()),
      sink: sink ?? new HttpEventSink(config.eventsUrl, dispatcher),
      defaults: config.defaults,
      sessionFile: join(config.workspaceDir, SESSION_FILE),
      ...(config.maxIterations !== undefined ? { maxIterations: config.maxIterations } : {}),
    })
    return await agent.runSession(source, signal)
  } finally {
    await dispatcher.close()
  }
}

/**
 * A task that brings its own capability token (handed to a warm agent) switches the agent's
 * client to it, and the proxy variables its tools inherit, before the task runs.
 */
function adoptTaskTokens(source: TaskSource, dispatcher: Dispatcher): TaskSource {
  return {
    async next() {
      const task = await source.next()
      if (!task?.proxy_token) return task
      const { proxy_token: token, ...rest } = task
      adoptProxyToken(dispatcher, token)
      return rest
    },
  }
}

export interface AgentProcessOptions {
  taskFile?: string
  /** Write events to stdout as NDJSON instead of posting them. */
  eventsToStdout?: boolean
  /** Diagnostics (stderr). */
  log?: (line: string) => void
}

/**
 * The agent as a process: configuration from the environment, SIGTERM/SIGINT end the current task
 * as `interrupted`. Shared by `corral agent` and the lean entry the runtime starts (main.ts).
 * Throws (message only) when the environment is incomplete.
 */
export async function runAgentProcess(options: AgentProcessOptions = {}): Promise<TaskOutcome[]> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`))
  const config = configFromEnv()
  const taskFile = options.taskFile ?? config.taskFile
  const controller = new AbortController()
  const interrupt = (): void => {
    log('corral agent: interrupted, ending the current task')
    controller.abort()
  }
  process.once('SIGTERM', interrupt)
  process.once('SIGINT', interrupt)
  try {
    const sink = options.eventsToStdout ? new NdjsonEventSink(process.stdout) : undefined
    return await runAgent(config, taskFile ? new FileTaskSource(taskFile) : undefined, sink, controller.signal)
  } finally {
    process.off('SIGTERM', interrupt)
    process.off('SIGINT', interrupt)
  }
}
