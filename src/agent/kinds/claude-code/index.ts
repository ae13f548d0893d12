// Claude Code (`@anthropic-ai/claude-code`, the native linux-x64 build) as a corral agent kind:
// `claude -p --output-format stream-json --verbose`, the task on stdin, permissions bypassed (the
// workspace sandbox is the boundary, with no way out but the proxy), and its stream JSON read into
// corral's agent events. Settings are the CLI's documented environment variables
// (docs/agent.md "claude-code").
import { join } from 'node:path'
import type { AgentEvent } from '../../event-sink.js'
import { cutInput, parseLine, resultText, toolResultEvent } from '../translate.js'
import type { AgentAdapter, CliInvocation, CliResult, CliTaskContext, CliTranslator } from '../types.js'

/**
 * Switches off everything Claude Code would send besides the model call: telemetry (Statsig),
 * error reporting (Sentry), the auto-updater, feedback prompts and the side model calls that
 * title sessions; CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC covers the first ones at once.
 */
export const CLAUDE_QUIET_ENV: Readonly<Record<string, string>> = {
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
  DISABLE_AUTOUPDATER: '1',
  DISABLE_TELEMETRY: '1',
  DISABLE_ERROR_REPORTING: '1',
  DISABLE_BUG_COMMAND: '1',
  DISABLE_NON_ESSENTIAL_MODEL_CALLS: '1',
  DISABLE_COST_WARNINGS: '1',
  CLAUDE_CODE_DISABLE_TERMINAL_TITLE: '1',
}

/**
 * Placeholder key: Claude Code refuses to start without a credential, and the real one is added
 * by the proxy's auth transform on the way out (docs/credentials.md), never seen in the sandbox.
 */
export const PLACEHOLDER_API_KEY = 'corral-proxy-injects-the-credential'

function invocation(ctx: CliTaskContext): CliInvocation {
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(ctx.env)) if (v !== undefined) env[k] = v
  Object.assign(env, CLAUDE_QUIET_ENV, {
    ANTHROPIC_BASE_URL: ctx.baseUrl,
    ANTHROPIC_API_KEY: env.CORRAL_MODEL_API_KEY || PLACEHOLDER_API_KEY,
    // Its settings, sessions and todos live under /data/.corral/claude-code: snapshotted, so
    // `--resume` finds the conversation after a restart or in a fork.
    CLAUDE_CONFIG_DIR: join(ctx.stateDir, 'config'),
    HOME: join(ctx.stateDir, 'home'),
  })
  // The CA: NODE_EXTRA_CA_CERTS (the runtime sets it) is what Claude Code documents for a custom CA.
  const argv = [
    ...ctx.cli, '-p', '--output-format', 'stream-json', '--verbose', '--model', ctx.model,
    '--dangerously-skip-permissions',
    ...(ctx.session.resume ? ['--resume', ctx.session.id] : ['--session-id', ctx.session.id]),
  ]
  return { argv, env, stdin: ctx.task.description }
}

interface Usage {
  input_tokens?: number
  output_tokens?: number
  cache_creation_input_tokens?: number
  cache_read_input_tokens?: number
}

const inputOf = (u: Usage): number => (u.input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0) + (u.cache_read_input_tokens ?? 0)

// long-function: one closure over the translator's state; each branch is one message type of the stream.
function translator(): CliTranslator {
  let sessionId: string | undefined
  let iteration = 0
  let lastMessage: string | undefined
  const turnUsage = new Map<string, Usage>()
  let finalUsage: { input_tokens: number; output_tokens: number } | undefined
  let result: CliResult | undefined
  const tools = new Map<string, { name: string; iteration: number; at: number }>()

  const usage = (): { input_tokens: number; output_tokens: number } => {
    if (finalUsage) return finalUsage
    let input = 0
    let output = 0
    for (const u of turnUsage.values()) {
      input += inputOf(u)
      output += u.output_tokens ?? 0
    }
    return { input_tokens: input, output_tokens: output }
  }

  const assistant = (msg: Record<string, unknown>): AgentEvent[] => {
    const out: AgentEvent[] = []
    const id = typeof msg.id === 'string' ? msg.id : undefined
    // Claude Code writes one line per content block; the blocks of one model turn share its id.
    const newTurn = id === undefined || id !== lastMessage
    if (newTurn) {
      iteration++
      lastMessage = id
      out.push({ type: 'iteration_start', iteration })
    }
    if (id && msg.usage && typeof msg.usage === 'object') turnUsage.set(id, msg.usage as Usage)
    for (const block of Array.isArray(msg.content) ? (msg.content as Record<string, unknown>[]) : []) {
      if (block.type === 'text' && typeof block.text === 'string' && block.text !== '') out.push({ type: 'agent_response', iteration, text: block.text })
      else if (block.type === 'thinking' && typeof block.thinking === 'string') out.push({ type: 'agent_thinking', iteration, text: block.thinking })
      else if (block.type === 'tool_use') {
        const useId = String(block.id ?? '')
        const name = String(block.name ?? 'unknown')
        tools.set(useId, { name, iteration, at: Date.now() })
        out.push({ type: 'tool_call', iteration, tool_use_id: useId, tool: name, input: cutInput(block.input) })
      }
    }
    if (newTurn) {
      const u = usage()
      out.push({ type: 'progress_status', iteration, input_tokens: u.input_tokens, output_tokens: u.output_tokens })
    }
    return out
  }

  const user = (msg: Record<string, unknown>): AgentEvent[] => {
    const out: AgentEvent[] = []
    for (const block of Array.isArray(msg.content) ? (msg.content as Record<string, unknown>[]) : []) {
      if (block.type !== 'tool_result') continue
      const useId = String(block.tool_use_id ?? '')
      const call = tools.get(useId)
      out.push(toolResultEvent({
        iteration: call?.iteration ?? iteration, tool_use_id: useId, tool: call?.name ?? 'unknown', is_error: block.is_error === true,
        output: resultText(block.content), ...(call ? { duration_ms: Date.now() - call.at } : {}),
      }))
    }
    return out
  }

  return {
    line(text) {
      const msg = parseLine(text)
      if (!msg) return []
      if (typeof msg.session_id === 'string') sessionId = msg.session_id
      if (msg.type === 'assistant' && msg.message && typeof msg.message === 'object') return assistant(msg.message as Record<string, unknown>)
      if (msg.type === 'user' && msg.message && typeof msg.message === 'object') return user(msg.message as Record<string, unknown>)
      if (msg.type === 'result') {
        const u = msg.usage as Usage | undefined
        if (u) finalUsage = { input_tokens: inputOf(u), output_tokens: u.output_tokens ?? 0 }
        const text = typeof msg.result === 'string' ? msg.result : ''
        const failed = msg.is_error === true || (typeof msg.subtype === 'string' && msg.subtype.startsWith('error'))
        const status = typeof msg.api_error_status === 'number' ? `API error ${msg.api_error_status}: ` : ''
        const errors = Array.isArray(msg.errors) ? (msg.errors as unknown[]).map(String).join('; ') : ''
        result = failed
          ? { status: 'failed', summary: text || errors || String(msg.subtype ?? 'error'), error: `${status}${text || errors || String(msg.subtype ?? 'error')}` }
          : { status: 'completed', summary: text }
      }
      return []
    },
    sessionId: () => sessionId,
    iterations: () => iteration,
    usage,
    result: () => result,
  }
}

export const claudeCode: AgentAdapter = {
  kind: 'claude-code',
  providers: ['anthropic'],
  invocation,
  translator,
}
