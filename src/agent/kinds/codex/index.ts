// Codex CLI (`@openai/codex`, the native linux-x64 musl build) as a corral agent kind:
// `codex exec --json`, the task on stdin, its JSONL events read into corral's agent events, and
// `codex exec resume <thread id>` for a follow-up. The model endpoint is a model provider of its
// config.toml (`base_url`, the Responses API over its WebSocket, HTTPS as the fallback), written into its own home under
// /data/.corral/codex with update checks, analytics, plugins and apps off (docs/agent.md "codex").
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { AgentEvent } from '../../event-sink.js'
import { cutInput, parseLine, toolResultEvent } from '../translate.js'
import type { AgentAdapter, CliInvocation, CliResult, CliTaskContext, CliTranslator } from '../types.js'

/** Placeholder key: Codex wants one in `env_key`; the proxy puts the real credential on the way out. */
export const PLACEHOLDER_API_KEY = 'corral-proxy-injects-the-credential'

const toml = (s: string): string => JSON.stringify(s)

/**
 * Its config.toml: one model provider, the role's, at the proxy-reached base URL (the Responses
 * API over a WebSocket as Codex speaks to OpenAI, HTTPS when the socket is refused); nothing else
 * sent: no update check, no analytics, no plugin or app sync (which reach github.com and chatgpt.com).
 */
export function codexConfig(ctx: Pick<CliTaskContext, 'baseUrl' | 'model'>): string {
  return [
    `model = ${toml(ctx.model)}`,
    'model_provider = "corral"',
    'check_for_update_on_startup = false',
    '',
    '[analytics]',
    'enabled = false',
    '',
    '[features]',
    'plugins = false',
    'apps = false',
    'remote_plugin = false',
    'plugin_discovery_prefetch = false',
    '',
    '[model_providers.corral]',
    'name = "corral"',
    `base_url = ${toml(ctx.baseUrl.replace(/\/+$/, ''))}`,
    'env_key = "OPENAI_API_KEY"',
    'wire_api = "responses"',
    // Codex's own default for OpenAI: the Responses API over a WebSocket (`GET …/responses`
    // upgraded), HTTPS only when the socket fails. The proxy decides the upgrade and meters its messages.
    'supports_websockets = true',
    // Retries are the proxy's and the user's to decide; one retry keeps a transient error cheap.
    'request_max_retries = 1',
    'stream_max_retries = 1',
    '',
  ].join('\n')
}

function invocation(ctx: CliTaskContext): CliInvocation {
  const home = join(ctx.stateDir, 'home')
  const codexHome = join(home, '.codex')
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(ctx.env)) if (v !== undefined) env[k] = v
  Object.assign(env, {
    OPENAI_API_KEY: env.CORRAL_MODEL_API_KEY || PLACEHOLDER_API_KEY,
    // Its config, sessions (what `resume` reads) and logs live under /data/.corral/codex.
    CODEX_HOME: codexHome,
    HOME: home,
    NO_COLOR: '1',
  })
  // The corral CA: Codex documents CODEX_CA_CERTIFICATE (a PEM bundle) for a custom root.
  const ca = env.SSL_CERT_FILE || env.CORRAL_CA_FILE
  if (ca) env.CODEX_CA_CERTIFICATE = ca
  // The workspace sandbox is the boundary: Codex's own sandbox (landlock, seccomp, its bwrap) stays off.
  const common = ['--json', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', '--model', ctx.model]
  const argv = ctx.session.resume ? [...ctx.cli, 'exec', 'resume', ...common, ctx.session.id, '-'] : [...ctx.cli, 'exec', ...common, '-']
  return { argv, env, stdin: ctx.task.description, files: { [join(codexHome, 'config.toml')]: codexConfig(ctx) } }
}

interface Item {
  id?: string
  type?: string
  text?: string
  command?: string
  aggregated_output?: string
  exit_code?: number | null
  status?: string
  changes?: Array<{ path?: string; kind?: string }>
  message?: string
  server?: string
  tool?: string
  arguments?: unknown
  result?: unknown
  error?: { message?: string } | null
}

/** The corral tool name and input for a Codex item that runs something, or undefined for other items. */
function toolOf(item: Item): { tool: string; input: Record<string, unknown> } | undefined {
  if (item.type === 'command_execution') return { tool: 'command_execution', input: { command: item.command ?? '' } }
  if (item.type === 'file_change') return { tool: 'apply_patch', input: { changes: item.changes ?? [] } }
  if (item.type === 'mcp_tool_call') return { tool: `mcp:${item.server ?? ''}/${item.tool ?? ''}`, input: cutInput(item.arguments ?? {}) }
  if (item.type === 'web_search') return { tool: 'web_search', input: { query: (item as { query?: string }).query ?? '' } }
  return undefined
}

function outputOf(item: Item): { output: string; isError: boolean } {
  if (item.type === 'command_execution') return { output: item.aggregated_output ?? '', isError: item.status === 'failed' || (item.exit_code ?? 0) !== 0 }
  if (item.type === 'file_change') return { output: (item.changes ?? []).map((c) => `${c.kind ?? 'update'} ${c.path ?? ''}`).join('\n'), isError: item.status === 'failed' }
  if (item.type === 'mcp_tool_call') return { output: item.error?.message ?? JSON.stringify(item.result ?? ''), isError: item.status === 'failed' }
  return { output: '', isError: item.status === 'failed' }
}

/**
 * Codex reports a thread's usage as running totals since the thread began, so a resumed task's
 * usage is the difference from the totals at the end of the previous task (kept beside its home).
 */
function usageSince(stateDir: string, threadId: string | undefined, totals: { input_tokens: number; output_tokens: number }): { input_tokens: number; output_tokens: number } {
  const file = join(stateDir, 'usage.json')
  let before = { thread_id: '', input_tokens: 0, output_tokens: 0 }
  try {
    before = { ...before, ...(JSON.parse(readFileSync(file, 'utf8')) as typeof before) }
  } catch {
    // No earlier task in this state directory.
  }
  try {
    writeFileSync(file, JSON.stringify({ thread_id: threadId ?? '', ...totals }))
  } catch {
    // Unwritable state: the next resumed task reports its thread's totals.
  }
  if (before.thread_id !== threadId || before.input_tokens > totals.input_tokens) return totals
  return { input_tokens: totals.input_tokens - before.input_tokens, output_tokens: Math.max(0, totals.output_tokens - before.output_tokens) }
}

// long-function: one closure over the translator's state; each branch is one event type of the JSONL.
function translator(ctx: CliTaskContext): CliTranslator {
  let threadId: string | undefined
  let iteration = 0
  // A model turn is open from its first message or tool until a tool's result comes back.
  let inTurn = false
  let lastText = ''
  let lastError = ''
  let usage = { input_tokens: 0, output_tokens: 0 }
  let result: CliResult | undefined
  const started = new Map<string, { tool: string; iteration: number; at: number }>()

  const openTurn = (out: AgentEvent[]): void => {
    if (inTurn) return
    inTurn = true
    iteration++
    out.push({ type: 'iteration_start', iteration })
  }
  const startTool = (item: Item, out: AgentEvent[]): void => {
    const tool = toolOf(item)
    const id = String(item.id ?? '')
    if (!tool || started.has(id)) return
    openTurn(out)
    started.set(id, { tool: tool.tool, iteration, at: Date.now() })
    out.push({ type: 'tool_call', iteration, tool_use_id: id, tool: tool.tool, input: cutInput(tool.input) })
  }

  return {
    line(raw) {
      const msg = parseLine(raw)
      if (!msg) return []
      const out: AgentEvent[] = []
      const item = (msg.item ?? {}) as Item
      switch (msg.type) {
        case 'thread.started':
          if (typeof msg.thread_id === 'string') threadId = msg.thread_id
          break
        case 'item.started':
          startTool(item, out)
          break
        case 'item.completed': {
          if (item.type === 'agent_message' && typeof item.text === 'string') {
            openTurn(out)
            out.push({ type: 'agent_response', iteration, text: item.text })
            lastText = item.text
          } else if (item.type === 'reasoning' && typeof item.text === 'string') {
            openTurn(out)
            out.push({ type: 'agent_thinking', iteration, text: item.text })
          } else if (item.type === 'error') {
            // A warning the CLI goes on after (a fallback, unknown model metadata): kept for a failure's reason.
            lastError = String(item.message ?? '')
          } else if (toolOf(item)) {
            startTool(item, out)
            const call = started.get(String(item.id ?? ''))!
            const { output, isError } = outputOf(item)
            out.push(toolResultEvent({ iteration: call.iteration, tool_use_id: String(item.id ?? ''), tool: call.tool, is_error: isError, output, duration_ms: Date.now() - call.at }))
            inTurn = false
          }
          break
        }
        case 'turn.completed': {
          const u = (msg.usage ?? {}) as { input_tokens?: number; output_tokens?: number }
          usage = usageSince(ctx.stateDir, threadId, { input_tokens: u.input_tokens ?? 0, output_tokens: u.output_tokens ?? 0 })
          out.push({ type: 'progress_status', iteration, ...usage })
          result = { status: 'completed', summary: lastText }
          break
        }
        case 'turn.failed': {
          const message = String((msg.error as { message?: unknown } | undefined)?.message ?? (lastError || 'the turn failed'))
          result = { status: 'failed', summary: message, error: message }
          break
        }
        case 'error':
          lastError = String(msg.message ?? '')
          break
      }
      return out
    },
    sessionId: () => threadId,
    iterations: () => iteration,
    usage: () => ({ ...usage }),
    result: () => result,
  }
}

export const codex: AgentAdapter = {
  kind: 'codex',
  providers: ['openai'],
  invocation,
  translator,
}
