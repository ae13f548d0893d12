// Gemini CLI (`@google/gemini-cli`, its bundle run with corral's node) as a corral agent kind:
// `gemini --prompt=<task> --output-format stream-json --yolo --skip-trust`, its stream JSON read
// into corral's agent events. The model endpoint is GOOGLE_GEMINI_BASE_URL; the key is a
// placeholder the proxy replaces; telemetry, usage statistics and update checks are off through
// its documented user settings, written into its own home under /data/.corral/gemini-cli
// (docs/agent.md "gemini-cli").
import { join } from 'node:path'
import type { AgentEvent } from '../../event-sink.js'
import { cutInput, parseLine, toolResultEvent } from '../translate.js'
import type { AgentAdapter, CliInvocation, CliResult, CliTaskContext, CliTranslator } from '../types.js'

/**
 * The user settings (`~/.gemini/settings.json`): the API-key auth (the only one that runs headless
 * against a base URL), no folder-trust prompt, and nothing sent besides the model calls —
 * telemetry (OpenTelemetry export), usage statistics (Clearcut), the update check.
 */
export const GEMINI_SETTINGS = {
  security: { auth: { selectedType: 'gemini-api-key' }, folderTrust: { enabled: false } },
  privacy: { usageStatisticsEnabled: false },
  telemetry: { enabled: false },
  general: { disableAutoUpdate: true, disableUpdateNag: true },
} as const

export const PLACEHOLDER_API_KEY = 'corral-proxy-injects-the-credential'

function invocation(ctx: CliTaskContext): CliInvocation {
  const home = join(ctx.stateDir, 'home')
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(ctx.env)) if (v !== undefined) env[k] = v
  Object.assign(env, {
    GOOGLE_GEMINI_BASE_URL: ctx.baseUrl,
    GEMINI_API_KEY: env.CORRAL_MODEL_API_KEY || PLACEHOLDER_API_KEY,
    // Its settings, chats (what --resume reads) and logs live under /data/.corral/gemini-cli.
    GEMINI_CLI_HOME: home,
    HOME: home,
    // No terminal: keep its output plain.
    NO_COLOR: '1',
  })
  const argv = [
    ...ctx.cli, `--prompt=${ctx.task.description}`, '--output-format', 'stream-json', '--approval-mode', 'yolo', '--skip-trust',
    '--model', ctx.model, ...(ctx.session.resume ? ['--resume', ctx.session.id] : ['--session-id', ctx.session.id]),
  ]
  return { argv, env, files: { [join(home, '.gemini', 'settings.json')]: `${JSON.stringify(GEMINI_SETTINGS, null, 2)}\n` } }
}

// long-function: one closure over the translator's state; each branch is one record type of the stream.
function translator(): CliTranslator {
  let sessionId: string | undefined
  let iteration = 0
  // A model turn is open from its first text or tool call until a tool result comes back.
  let inTurn = false
  let text = ''
  // The final answer: the last text the model gave (the result record carries none).
  let lastText = ''
  let usage = { input_tokens: 0, output_tokens: 0 }
  let result: CliResult | undefined
  let lastError = ''
  const tools = new Map<string, { name: string; iteration: number; at: number }>()

  const openTurn = (out: AgentEvent[]): void => {
    if (inTurn) return
    inTurn = true
    iteration++
    out.push({ type: 'iteration_start', iteration })
  }
  /** The turn's text so far, as one agent_response (the CLI streams it in deltas). */
  const flushText = (out: AgentEvent[]): void => {
    if (text !== '') {
      out.push({ type: 'agent_response', iteration, text })
      lastText = text
    }
    text = ''
  }

  return {
    line(raw) {
      const msg = parseLine(raw)
      if (!msg) return []
      const out: AgentEvent[] = []
      if (typeof msg.session_id === 'string') sessionId = msg.session_id
      switch (msg.type) {
        case 'message':
          if (msg.role === 'assistant' && typeof msg.content === 'string') {
            openTurn(out)
            text += msg.content
          }
          break
        case 'tool_use': {
          openTurn(out)
          flushText(out)
          const id = String(msg.tool_id ?? '')
          const name = String(msg.tool_name ?? 'unknown')
          tools.set(id, { name, iteration, at: Date.now() })
          out.push({ type: 'tool_call', iteration, tool_use_id: id, tool: name, input: cutInput(msg.parameters ?? {}) })
          break
        }
        case 'tool_result': {
          flushText(out)
          const id = String(msg.tool_id ?? '')
          const call = tools.get(id)
          const error = msg.error && typeof msg.error === 'object' ? String((msg.error as { message?: unknown }).message ?? '') : ''
          out.push(toolResultEvent({
            iteration: call?.iteration ?? iteration, tool_use_id: id, tool: call?.name ?? 'unknown', is_error: msg.status === 'error',
            output: typeof msg.output === 'string' ? msg.output : error, ...(call ? { duration_ms: Date.now() - call.at } : {}),
          }))
          inTurn = false
          break
        }
        case 'error':
          lastError = String(msg.message ?? '')
          break
        case 'result': {
          flushText(out)
          const stats = msg.stats as { input_tokens?: number; output_tokens?: number } | undefined
          // The CLI reports usage once, with its result: one progress_status with the totals.
          if (stats) {
            usage = { input_tokens: stats.input_tokens ?? 0, output_tokens: stats.output_tokens ?? 0 }
            out.push({ type: 'progress_status', iteration, ...usage })
          }
          if (msg.status === 'success') result = { status: 'completed', summary: lastText }
          else {
            const e = msg.error as { message?: unknown; type?: unknown } | undefined
            const message = String(e?.message ?? (lastError || 'error'))
            result = { status: 'failed', summary: message, error: message }
          }
          break
        }
      }
      return out
    },
    sessionId: () => sessionId,
    iterations: () => iteration,
    usage: () => usage,
    result: () => result,
  }
}

export const geminiCli: AgentAdapter = {
  kind: 'gemini-cli',
  providers: ['gemini'],
  invocation,
  translator,
}
