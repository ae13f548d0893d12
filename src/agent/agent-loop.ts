import { randomUUID } from 'node:crypto'
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import type { AgentEvent, EventSink } from './event-sink.js'
import { type Block, type Message, type ModelClient, ModelError, type Turn, type TurnRequest, type Usage } from './model.js'
import type { AgentDefaults, AgentTask, TaskOutcome, TaskStatus } from '../contract/index.js'
import type { TaskSource } from './task-source.js'
import { type DiskUsage, diskOverText, TOOL_SPECS, type Toolbox } from './tools.js'

export interface AgentOptions {
  model: ModelClient
  tools: Toolbox
  sink: EventSink
  defaults?: Partial<AgentDefaults>
  /** Where the conversation is kept between tasks (and so across stop, restart and fork); null keeps it in memory. */
  sessionFile?: string | null
  /** Safety stop for a model that never finishes. Default 50. */
  maxIterations?: number
  /** Output tokens per model turn (thinking budget comes on top). Default 8192. */
  maxTokens?: number
  /** Extra attempts for retryable model errors (429, 5xx, overload). Default 2. */
  retries?: number
  /** Pause before retry `n` (1-based); injectable so tests do not wait. */
  backoff?: (attempt: number) => Promise<void>
}

const DEFAULTS: AgentDefaults = {
  thinking_effort: 'off', max_continuations: 0, max_context_tokens: 0, environment: 'development', environment_description: '',
}
/** What a tool_result event carries of the output (the model sees up to tools.OUTPUT_CAP). */
const EVENT_OUTPUT_CAP = 2000

/** A task's running totals across iterations. */
interface TaskRun {
  usage: Usage
  contextTokens: number
  continuations: number
  lastText: string
  iteration: number
  scanNoticeSent: boolean
}

/** How a task ends: status, summary, and the reason when it failed. */
type TaskEnd = [status: TaskStatus, summary: string, reason?: string]

const COMPACTION_PROMPT = 'The conversation is about to be compacted because it is too long. Do not call any tool. ' +
  'Write a concise summary of everything needed to continue: the task, what has been done (files written, commands run, results), ' +
  'what remains, and any facts or decisions that matter.'

/**
 * The reference agent: takes tasks from a source, runs a tool-using loop against the role's
 * model, and reports every step as an agent event (control-plane.md "Agent events").
 */
export class Agent {
  readonly #o: AgentOptions
  readonly #defaults: AgentDefaults
  #messages: Message[] = []
  #sessionId: string | null = null
  #lastTaskId: string | null = null

  constructor(options: AgentOptions) {
    this.#o = options
    this.#defaults = { ...DEFAULTS, ...options.defaults }
  }

  /** Runs every task the source gives, then ends the session. */
  async runSession(source: TaskSource, signal?: AbortSignal): Promise<TaskOutcome[]> {
    const outcomes: TaskOutcome[] = []
    for (let task = await source.next(); task; task = signal?.aborted ? null : await source.next()) {
      outcomes.push(await this.runTask(task, signal))
    }
    if (this.#sessionId && this.#lastTaskId) {
      await this.#emit(this.#lastTaskId, { type: 'session_end', session_id: this.#sessionId, tasks: outcomes.length })
    }
    return outcomes
  }

  async runTask(task: AgentTask, signal?: AbortSignal): Promise<TaskOutcome> {
    const s: AgentDefaults = {
      thinking_effort: task.thinking_effort ?? this.#defaults.thinking_effort,
      max_continuations: task.max_continuations ?? this.#defaults.max_continuations,
      max_context_tokens: task.max_context_tokens ?? this.#defaults.max_context_tokens,
      environment: task.environment ?? this.#defaults.environment,
      environment_description: task.environment_description ?? this.#defaults.environment_description,
    }
    this.#lastTaskId = task.id
    this.#o.tools.beginTask()
    await this.#openSession(task)
    await this.#emit(task.id, {
      type: 'task_start', description: task.description, session_id: this.#sessionId,
      thinking_effort: s.thinking_effort, max_continuations: s.max_continuations, max_context_tokens: s.max_context_tokens,
      environment: s.environment, uploads: task.uploads ?? [],
    })
    // A resumed conversation ends with the previous task's finish result (a user turn); the new
    // task joins it so user and assistant turns keep alternating.
    const last = this.#messages.at(-1)
    if (last?.role === 'user') last.content.push({ type: 'text', text: taskPrompt(task) })
    else this.#messages.push({ role: 'user', content: [{ type: 'text', text: taskPrompt(task) }] })

    const run: TaskRun = { usage: { input_tokens: 0, output_tokens: 0 }, contextTokens: 0, continuations: 0, lastText: '', iteration: 0, scanNoticeSent: false }
    const maxIterations = this.#o.maxIterations ?? 50
    const end = async ([status, summary, reason]: TaskEnd): Promise<TaskOutcome> => {
      if (status === 'completed') {
        // Whatever the task did last (a write, a background job), it may not leave /data over its quota.
        const over = await this.#o.tools.diskOver().catch(() => null)
        if (over) [status, summary, reason] = ['failed', diskOverText(over), 'disk_quota_exceeded']
      }
      const { iteration, usage } = run
      const outcome: TaskOutcome = { task_id: task.id, status, summary, iterations: iteration, usage, ...(reason ? { reason } : {}) }
      await this.#saveSession()
      await this.#emit(task.id, { type: 'task_end', status, summary, iterations: iteration, usage, ...(reason ? { reason } : {}) })
      return outcome
    }

    try {
      for (;;) {
        if (signal?.aborted) return await end(['failed', 'The agent was interrupted.', 'interrupted'])
        if (run.iteration >= maxIterations) return await end(['failed', `Stopped after ${maxIterations} iterations without finishing.`, 'iteration_limit'])
        const ended = await this.#iterate(task, s, run, signal)
        if (ended) return await end(ended)
      }
    } catch (err) {
      if (signal?.aborted) return await end(['failed', 'The agent was interrupted.', 'interrupted'])
      const reason = err instanceof ModelError ? 'model_error' : 'agent_error'
      return await end(['failed', (err as Error).message, reason])
    }
  }

  /** One model turn and the tools it calls; how the task ends, or undefined to go on. */
  async #iterate(task: AgentTask, s: AgentDefaults, run: TaskRun, signal?: AbortSignal): Promise<TaskEnd | undefined> {
    const iteration = ++run.iteration
    const { usage } = run
    await this.#emit(task.id, { type: 'iteration_start', iteration })
    if (s.max_context_tokens > 0 && run.contextTokens > s.max_context_tokens) {
      run.contextTokens = await this.#compact(task, s, run.contextTokens, usage, signal)
    }
    const turn = await this.#turn({ system: systemPrompt(this.#o.tools.root, s, this.#o.tools.diskQuotaBytes), messages: this.#messages, tools: TOOL_SPECS, thinking: s.thinking_effort, maxTokens: this.#o.maxTokens ?? 8192 }, signal)
    usage.input_tokens += turn.usage.input_tokens
    usage.output_tokens += turn.usage.output_tokens
    run.contextTokens = turn.usage.input_tokens + turn.usage.output_tokens
    this.#messages.push({ role: 'assistant', content: turn.content })

    for (const b of turn.content) if (b.type === 'thinking' && b.thinking !== '') await this.#emit(task.id, { type: 'agent_thinking', iteration, text: b.thinking })
    const text = turn.content.filter((b): b is Extract<Block, { type: 'text' }> => b.type === 'text').map((b) => b.text).join('')
    if (text !== '') {
      run.lastText = text
      await this.#emit(task.id, { type: 'agent_response', iteration, text })
    }

    const { results, finish, diskOver } = await this.#runTools(task, turn, run, signal)
    if (results.length > 0) this.#messages.push({ role: 'user', content: results })

    await this.#emit(task.id, {
      type: 'progress_status', iteration, input_tokens: usage.input_tokens, output_tokens: usage.output_tokens, context_tokens: run.contextTokens,
    })
    await this.#emit(task.id, { type: 'iteration_end', iteration, stop_reason: turn.stopReason, usage: turn.usage, tool_calls: results.length })

    if (diskOver) return ['failed', diskOverText(diskOver), 'disk_quota_exceeded']
    if (finish) return [finish.status, finish.summary || run.lastText, finish.status === 'failed' ? 'agent_reported_failure' : undefined]
    if (results.length > 0) return undefined
    if (turn.stopReason === 'refusal') return ['failed', run.lastText || 'The model refused the task.', 'refusal']
    // The model stopped without calling finish: nudge it on while continuations remain.
    if (run.continuations < s.max_continuations) {
      run.continuations++
      const nudge = turn.stopReason === 'max_tokens'
        ? 'Your reply was cut off by the output limit. Continue where you stopped.'
        : 'Continue working on the task. When it is done, call the finish tool with a summary.'
      this.#messages.push({ role: 'user', content: [{ type: 'text', text: nudge }] })
      return undefined
    }
    return turn.stopReason === 'max_tokens' ? ['failed', run.lastText, 'max_tokens'] : ['completed', run.lastText]
  }

  /** Runs the turn's tool calls in order, reporting each; after a disk-quota failure the rest are answered unrun. */
  async #runTools(task: AgentTask, turn: Turn, run: TaskRun, signal?: AbortSignal) {
    const iteration = run.iteration
    const results: Block[] = []
    let finish: { summary: string; status: TaskStatus } | undefined
    let diskOver: DiskUsage | undefined
    for (const call of turn.content) {
      if (call.type !== 'tool_use') continue
      if (diskOver) {
        // Every tool_use needs its result, or the saved conversation cannot be resumed.
        results.push({ type: 'tool_result', tool_use_id: call.id, content: 'Not run: the task failed on the disk quota.', is_error: true })
        continue
      }
      await this.#emit(task.id, { type: 'tool_call', iteration, tool_use_id: call.id, tool: call.name, input: clipStrings(call.input) })
      const started = Date.now()
      const out = await this.#o.tools.run(call.name, call.input, signal)
      await this.#emit(task.id, {
        type: 'tool_result', iteration, tool_use_id: call.id, tool: call.name, is_error: out.isError,
        output: out.output.slice(0, EVENT_OUTPUT_CAP), truncated: out.output.length > EVENT_OUTPUT_CAP, duration_ms: Date.now() - started,
      })
      if (out.scanTruncated && !run.scanNoticeSent) {
        // Once per task: the tree is larger than the change scan looks at.
        run.scanNoticeSent = true
        await this.#emit(task.id, { type: 'file_change', iteration, path: '.', action: 'modified', scan_truncated: true })
      }
      for (const change of out.fileChanges ?? []) await this.#emit(task.id, { type: 'file_change', iteration, ...change })
      if (out.diskOver) diskOver = out.diskOver
      if (out.finish) finish = out.finish
      results.push({ type: 'tool_result', tool_use_id: call.id, content: out.output, ...(out.isError ? { is_error: true } : {}) })
    }
    return { results, finish, diskOver }
  }

  async #openSession(task: AgentTask): Promise<void> {
    const file = this.#o.sessionFile ?? null
    if (task.reset_session) {
      this.#messages = []
      this.#sessionId = null
      if (file) await rm(file, { force: true })
    }
    if (this.#sessionId) return
    let resumed = false
    if (file && !task.reset_session) {
      const saved = await readFile(file, 'utf8').then((t) => JSON.parse(t) as { session_id: string; messages: Message[] }, () => null)
      if (saved) {
        this.#messages = saved.messages
        this.#sessionId = saved.session_id
        resumed = true
      }
    }
    this.#sessionId ??= randomUUID()
    await this.#emit(task.id, {
      type: 'session_start', session_id: this.#sessionId, provider: this.#o.model.provider, model: this.#o.model.model,
      resumed, reset: task.reset_session === true, messages: this.#messages.length,
    })
  }

  async #saveSession(): Promise<void> {
    const file = this.#o.sessionFile
    if (!file) return
    await mkdir(dirname(file), { recursive: true })
    const partial = `${file}.${process.pid}.partial`
    await writeFile(partial, JSON.stringify({ session_id: this.#sessionId, messages: this.#messages }))
    await rename(partial, file)
  }

  /** Replaces the conversation with a model-written summary once it outgrows max_context_tokens. */
  async #compact(task: AgentTask, s: AgentDefaults, contextTokens: number, usage: Usage, signal?: AbortSignal): Promise<number> {
    const before = this.#messages.length
    await this.#emit(task.id, { type: 'compaction_start', context_tokens: contextTokens, max_context_tokens: s.max_context_tokens, messages: before })
    // The request must end with a user turn; the prompt joins the last one (tool results or text).
    const messages = structuredClone(this.#messages)
    const last = messages.at(-1)
    if (last?.role === 'user') last.content.push({ type: 'text', text: COMPACTION_PROMPT })
    else messages.push({ role: 'user', content: [{ type: 'text', text: COMPACTION_PROMPT }] })
    const turn = await this.#turn({ system: systemPrompt(this.#o.tools.root, s, this.#o.tools.diskQuotaBytes), messages, tools: TOOL_SPECS, thinking: 'off', maxTokens: 2048 }, signal)
    usage.input_tokens += turn.usage.input_tokens
    usage.output_tokens += turn.usage.output_tokens
    const summary = turn.content.filter((b): b is Extract<Block, { type: 'text' }> => b.type === 'text').map((b) => b.text).join('')
    const text = `Earlier conversation, compacted into a summary:\n${summary}\n\nContinue the current task: ${task.description}`
    this.#messages = [{ role: 'user', content: [{ type: 'text', text }] }]
    const after = Math.ceil(text.length / 4)
    await this.#emit(task.id, { type: 'compaction_end', messages_before: before, messages_after: 1, context_tokens: after, summary_chars: summary.length })
    return after
  }

  async #turn(req: TurnRequest, signal?: AbortSignal): Promise<Turn> {
    const retries = this.#o.retries ?? 2
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#o.model.turn(req, undefined, signal)
      } catch (err) {
        if (!(err instanceof ModelError) || !err.retryable || attempt >= retries || signal?.aborted) throw err
        await (this.#o.backoff ?? ((n) => new Promise((r) => setTimeout(r, 1000 * n))))(attempt + 1)
      }
    }
  }

  #emit(taskId: string, event: AgentEvent): Promise<void> {
    return this.#o.sink.emit(taskId, { ...event, timestamp: new Date().toISOString() })
  }
}

export function systemPrompt(root: string, s: AgentDefaults, diskQuotaBytes?: number): string {
  const lines = [
    "You are corral's reference agent, working inside an isolated workspace on the user's behalf.",
    `Your working directory is ${root}. Files there persist between tasks; work only there.`,
    'All network access goes through a policy proxy. A request the workspace policy does not allow is refused with 403 and a reason; do not try to get around it.',
    'Tools: run_command (shell), read_file, write_file. When the task is done, or cannot be done, call finish once with a short summary.',
    `Environment: ${s.environment}.`,
  ]
  if (diskQuotaBytes !== undefined) {
    // Said up front, so the model keeps big downloads and builds in check instead of learning it from a failed task.
    lines.push(`${root} has a disk quota of ${Math.round(diskQuotaBytes / (1024 * 1024))} MB: a task that leaves it larger fails.`)
  }
  if (s.environment_description) lines.push(`About this environment: ${s.environment_description}`)
  return lines.join('\n')
}

/**
 * Tool input as reported in an event: long strings (a whole file for write_file) are cut, so an
 * audit row stays small; the model and the tool still get the full value.
 */
export function clipStrings(value: Record<string, unknown>, max = EVENT_OUTPUT_CAP): Record<string, unknown> {
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [
    k, typeof v === 'string' && v.length > max ? `${v.slice(0, max)}… [${v.length - max} more characters]` : v,
  ]))
}

function taskPrompt(task: AgentTask): string {
  const parts = [task.description]
  if (task.uploads && task.uploads.length > 0) parts.push(`Files uploaded with this task:\n${task.uploads.map((u) => `- ${u}`).join('\n')}`)
  if (task.metadata && Object.keys(task.metadata).length > 0) parts.push(`Task metadata: ${JSON.stringify(task.metadata)}`)
  return parts.join('\n\n')
}
