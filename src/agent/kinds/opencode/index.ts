// OpenCode (`opencode-ai`, the native linux-x64 build) as a corral agent kind: `opencode run
// --format json <task>`, its JSON events read into corral's agent events, `--session <id>` for a
// follow-up. The model endpoint is a provider of its config (OPENCODE_CONFIG): the Anthropic
// provider's `baseURL` for an anthropic role, the OpenAI-compatible one (Chat Completions) for an
// openai role; its home, sessions and cache live under /data/.corral/opencode; update checks, the
// models.dev catalogue fetch, default plugins, LSP downloads and sharing are off
// (docs/agent.md "opencode").
import { join } from 'node:path'
import { AGENT_KIND_PROVIDERS } from '../../../contract/resources.js'
import type { AgentEvent } from '../../event-sink.js'
import { cutInput, parseLine, toolResultEvent } from '../translate.js'
import type { AgentAdapter, CliInvocation, CliResult, CliTaskContext, CliTranslator } from '../types.js'

/** Placeholder key: OpenCode wants one; the proxy puts the real credential on the way out. */
export const PLACEHOLDER_API_KEY = 'corral-proxy-injects-the-credential'

/** Its documented switches for what it would fetch besides the model calls. */
export const OPENCODE_QUIET_ENV: Readonly<Record<string, string>> = {
  OPENCODE_DISABLE_AUTOUPDATE: '1',
  OPENCODE_DISABLE_MODELS_FETCH: '1',
  OPENCODE_DISABLE_DEFAULT_PLUGINS: '1',
  OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
  OPENCODE_DISABLE_SHARE: '1',
}

/** The config: one provider, the role's, with its model declared (no catalogue is fetched), every tool allowed. */
export function opencodeConfig(ctx: Pick<CliTaskContext, 'provider' | 'baseUrl' | 'model'>, apiKey: string): unknown {
  const base = ctx.baseUrl.replace(/\/+$/, '')
  const models = { [ctx.model]: { name: ctx.model, tool_call: true } }
  const provider = ctx.provider === 'anthropic'
    // The Anthropic SDK's baseURL includes the version; a corral anthropic provider's base URL does not.
    ? { anthropic: { options: { baseURL: `${base}/v1`, apiKey }, models } }
    : { corral: { npm: '@ai-sdk/openai-compatible', name: 'corral', options: { baseURL: base, apiKey }, models } }
  return {
    $schema: 'https://opencode.ai/config.json',
    model: `${ctx.provider === 'anthropic' ? 'anthropic' : 'corral'}/${ctx.model}`,
    provider,
    autoupdate: false,
    share: 'disabled',
    permission: { edit: 'allow', bash: 'allow', webfetch: 'allow' },
  }
}

function invocation(ctx: CliTaskContext): CliInvocation {
  const home = join(ctx.stateDir, 'home')
  const configFile = join(ctx.stateDir, 'opencode.json')
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(ctx.env)) if (v !== undefined) env[k] = v
  const apiKey = env.CORRAL_MODEL_API_KEY || PLACEHOLDER_API_KEY
  Object.assign(env, OPENCODE_QUIET_ENV, {
    OPENCODE_CONFIG: configFile,
    // Its sessions (what --session reads), cache and config dirs live under /data/.corral/opencode.
    HOME: home,
    XDG_CONFIG_HOME: join(home, '.config'),
    XDG_DATA_HOME: join(home, '.local', 'share'),
    XDG_CACHE_HOME: join(home, '.cache'),
    XDG_STATE_HOME: join(home, '.local', 'state'),
    NO_COLOR: '1',
  })
  // The CA: NODE_EXTRA_CA_CERTS (set by the runtime) is honoured by its Bun runtime's fetch.
  const argv = [...ctx.cli, 'run', '--format', 'json', '--model', (opencodeConfig(ctx, apiKey) as { model: string }).model, ...(ctx.session.resume ? ['--session', ctx.session.id] : []), ctx.task.description]
  return { argv, env, files: { [configFile]: `${JSON.stringify(opencodeConfig(ctx, apiKey), null, 2)}\n` } }
}

interface Part {
  type?: string
  text?: string
  tool?: string
  callID?: string
  reason?: string
  state?: { status?: string; input?: unknown; output?: unknown; error?: unknown; time?: { start?: number; end?: number } }
  tokens?: { input?: number; output?: number; cache?: { read?: number; write?: number } }
}

// long-function: one closure over the translator's state; each branch is one event type of its JSON.
function translator(): CliTranslator {
  let sessionId: string | undefined
  let iteration = 0
  let lastText = ''
  let lastReason = ''
  let lastError = ''
  const usage = { input_tokens: 0, output_tokens: 0 }

  return {
    line(raw) {
      const msg = parseLine(raw)
      if (!msg) return []
      const out: AgentEvent[] = []
      if (typeof msg.sessionID === 'string') sessionId = msg.sessionID
      const part = (msg.part ?? {}) as Part
      switch (msg.type) {
        case 'step_start':
          iteration++
          out.push({ type: 'iteration_start', iteration })
          break
        case 'text':
          if (typeof part.text === 'string' && part.text !== '') {
            out.push({ type: 'agent_response', iteration, text: part.text })
            lastText = part.text
          }
          break
        case 'reasoning':
          if (typeof part.text === 'string' && part.text !== '') out.push({ type: 'agent_thinking', iteration, text: part.text })
          break
        case 'tool_use': {
          // One event per finished tool: its call and its result together.
          const id = String(part.callID ?? '')
          const tool = String(part.tool ?? 'unknown')
          const state = part.state ?? {}
          out.push({ type: 'tool_call', iteration, tool_use_id: id, tool, input: cutInput(state.input ?? {}) })
          const isError = state.status === 'error'
          const output = typeof state.output === 'string' ? state.output : isError ? String(state.error ?? '') : JSON.stringify(state.output ?? '')
          const took = state.time?.end !== undefined && state.time.start !== undefined ? { duration_ms: Math.max(0, state.time.end - state.time.start) } : {}
          out.push(toolResultEvent({ iteration, tool_use_id: id, tool, is_error: isError, output, ...took }))
          break
        }
        case 'step_finish': {
          const t = part.tokens ?? {}
          usage.input_tokens += (t.input ?? 0) + (t.cache?.read ?? 0) + (t.cache?.write ?? 0)
          usage.output_tokens += t.output ?? 0
          lastReason = String(part.reason ?? '')
          out.push({ type: 'progress_status', iteration, ...usage })
          break
        }
        case 'error': {
          const e = msg.error as { name?: unknown; data?: { message?: unknown } ; message?: unknown } | undefined
          lastError = String(e?.data?.message ?? e?.message ?? e?.name ?? 'error')
          break
        }
      }
      return out
    },
    sessionId: () => sessionId,
    iterations: () => iteration,
    usage: () => ({ ...usage }),
    result: (): CliResult | undefined => {
      if (lastError !== '') return { status: 'failed', summary: lastError, error: lastError }
      if (lastReason === 'stop' || lastReason === 'end_turn') return { status: 'completed', summary: lastText }
      return lastReason === '' ? undefined : { status: 'failed', summary: `the model stopped (${lastReason})`, error: `the model stopped (${lastReason})` }
    },
  }
}

export const opencode: AgentAdapter = {
  kind: 'opencode',
  providers: AGENT_KIND_PROVIDERS.opencode,
  invocation,
  translator,
}
