// A fake model provider: a real HTTP(S) server on loopback that answers with scripted replies in
// the providers' real streaming wire formats — Anthropic Messages SSE on `/v1/messages` and OpenAI
// Chat Completions chunks on `/v1/chat/completions`, both with their `usage` events. `corral dev`
// runs it with the demo script (./demo-script.ts); the agent tests run it with their own scripts.
// Events are written in several pieces, some split mid-line, so the agent's incremental parsing is
// exercised as with a real network. It imports nothing from the control plane: it is only a server.
import http from 'node:http'
import https from 'node:https'
import type { AddressInfo } from 'node:net'
import { AGENT_KIND_PROVIDERS } from '../contract/index.js'

export interface ScriptedReply {
  thinking?: string
  text?: string
  tools?: Array<{ name: string; input: Record<string, unknown> }>
  stop?: 'end_turn' | 'tool_use' | 'max_tokens'
  usage?: { input: number; output: number }
  /** Answer with this HTTP status and body instead of a stream. */
  status?: number
  errorBody?: unknown
}

export interface SeenModelRequest {
  path: string
  headers: http.IncomingHttpHeaders
  body: any
}

/** The model's side of a conversation: the request body (either wire format) and its index → a reply. */
export type Script = (body: any, index: number) => ScriptedReply

/** A provider kind's streaming wire format (those the fake model speaks). */
export type WireFormat = (typeof AGENT_KIND_PROVIDERS.corral)[number]
const WIRE_FORMATS: readonly WireFormat[] = AGENT_KIND_PROVIDERS.corral

export const WIRE_PATHS: Readonly<Record<WireFormat, string>> = { anthropic: '/v1/messages', openai: '/v1/chat/completions' }

export interface FakeModelOptions {
  script: Script
  /** Serve HTTPS with this key pair; plain HTTP without. */
  tls?: { key: string; cert: string }
  /** Which wire formats to answer (default both); any other path is a 404. */
  formats?: readonly WireFormat[]
  host?: string
  /** Default 0: a free port. */
  port?: number
  /** Keep every request seen (tests assert on them); off for long-running use, which would grow without bound. */
  record?: boolean
  /** When set, a request must carry this key (`x-api-key` or `Authorization: Bearer`), or it is answered 401. */
  apiKey?: string
}

export interface FakeModel {
  url: string
  port: number
  /** Requests seen, when `record` is on. */
  requests: SeenModelRequest[]
  /** How many requests were answered (recorded or not). */
  served(): number
  close(): Promise<void>
}

/** Largest request body accepted; an agent conversation for the demo is a few kilobytes. */
const MAX_BODY = 8 * 1024 * 1024

export async function startFakeModel(opts: FakeModelOptions): Promise<FakeModel> {
  const formats = opts.formats ?? WIRE_FORMATS
  const requests: SeenModelRequest[] = []
  let count = 0
  const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const chunks: Buffer[] = []
    let size = 0
    req.on('data', (c: Buffer) => {
      size += c.length
      if (size > MAX_BODY) req.destroy()
      else chunks.push(c)
    })
    req.on('end', () => {
      // The path alone: Claude Code adds `?beta=true` to its Messages calls.
      const format = formats.find((f) => WIRE_PATHS[f] === (req.url ?? '').split('?')[0])
      if (req.method !== 'POST' || !format) return reply(res, 404, { type: 'error', error: { type: 'not_found_error', message: `the fake model answers POST ${formats.map((f) => WIRE_PATHS[f]).join(' and ')}` } })
      if (opts.apiKey !== undefined && !carriesKey(req.headers, opts.apiKey)) {
        return reply(res, 401, { type: 'error', error: { type: 'authentication_error', message: 'missing or wrong API key (the proxy injects it from the credential)' } })
      }
      let body: any
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
      } catch {
        return reply(res, 400, { type: 'error', error: { type: 'invalid_request_error', message: 'the body is not JSON' } })
      }
      const index = count++
      if (opts.record) requests.push({ path: req.url!, headers: req.headers, body })
      let scripted: ScriptedReply
      try {
        scripted = opts.script(body, index)
      } catch (err) {
        return reply(res, 500, { type: 'error', error: { type: 'api_error', message: `the script failed: ${(err as Error).message}` } })
      }
      if (scripted.status && scripted.status !== 200) {
        return reply(res, scripted.status, scripted.errorBody ?? { type: 'error', error: { type: 'api_error', message: 'scripted failure' } })
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
      const write = format === 'anthropic' ? writeAnthropic : writeOpenAi
      write(res, scripted, index, body).then(() => res.end(), () => res.destroy())
    })
  }
  const server = opts.tls ? https.createServer(opts.tls, handler) : http.createServer(handler)
  const host = opts.host ?? '127.0.0.1'
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject)
      resolve()
    })
  })
  const port = (server.address() as AddressInfo).port
  return {
    url: `${opts.tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    requests,
    served: () => count,
    close: () => new Promise((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
}

function carriesKey(headers: http.IncomingHttpHeaders, key: string): boolean {
  return headers['x-api-key'] === key || headers.authorization === `Bearer ${key}`
}

function reply(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(JSON.stringify(body))
}

/** Writes a payload in two pieces with a pause, so parsers see events split across reads. */
async function send(res: http.ServerResponse, payload: string): Promise<void> {
  if (res.destroyed) throw new Error('the client went away')
  const cut = Math.max(1, Math.floor(payload.length / 2))
  res.write(payload.slice(0, cut))
  await new Promise((r) => setImmediate(r))
  res.write(payload.slice(cut))
}

function pieces(text: string, size: number): string[] {
  const out: string[] = []
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size))
  return out.length > 0 ? out : ['']
}

const defaultUsage = (index: number) => ({ input: 100 + index, output: 20 })

/** Anthropic Messages streaming: message_start … content blocks … message_delta (usage) → message_stop. */
async function writeAnthropic(res: http.ServerResponse, reply: ScriptedReply, index: number, body: any): Promise<void> {
  const ev = (event: string, data: unknown): Promise<void> => send(res, `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)
  const block = async (i: number, start: unknown, deltas: unknown[]): Promise<void> => {
    await ev('content_block_start', { type: 'content_block_start', index: i, content_block: start })
    for (const delta of deltas) await ev('content_block_delta', { type: 'content_block_delta', index: i, delta })
    await ev('content_block_stop', { type: 'content_block_stop', index: i })
  }
  const usage = reply.usage ?? defaultUsage(index)
  await ev('message_start', {
    type: 'message_start',
    message: { id: `msg_fake_${index}`, type: 'message', role: 'assistant', model: body.model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: usage.input, output_tokens: 1 } },
  })
  await ev('ping', { type: 'ping' })
  let i = 0
  if (reply.thinking !== undefined) {
    const deltas = [...pieces(reply.thinking, 5).map((p) => ({ type: 'thinking_delta', thinking: p })), { type: 'signature_delta', signature: `sig-${index}` }]
    await block(i++, { type: 'thinking', thinking: '' }, deltas)
  }
  if (reply.text !== undefined) await block(i++, { type: 'text', text: '' }, pieces(reply.text, 6).map((p) => ({ type: 'text_delta', text: p })))
  for (const [n, tool] of (reply.tools ?? []).entries()) {
    const deltas = ['', ...pieces(JSON.stringify(tool.input), 7)].map((p) => ({ type: 'input_json_delta', partial_json: p }))
    await block(i++, { type: 'tool_use', id: `toolu_${index}_${n}`, name: tool.name, input: {} }, deltas)
  }
  const stop = reply.stop ?? ((reply.tools ?? []).length > 0 ? 'tool_use' : 'end_turn')
  await ev('message_delta', { type: 'message_delta', delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: usage.output } })
  await ev('message_stop', { type: 'message_stop' })
}

/** OpenAI Chat Completions streaming: chunks, a finish_reason chunk, a usage chunk, `[DONE]`. */
async function writeOpenAi(res: http.ServerResponse, reply: ScriptedReply, index: number, body: any): Promise<void> {
  const id = `chatcmpl-fake-${index}`
  const created = 1_760_000_000
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}): Promise<void> =>
    send(res, `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: body.model, system_fingerprint: 'fp_fake', choices, ...extra })}\n\n`)
  const delta = (d: Record<string, unknown>): Promise<void> => chunk([{ index: 0, delta: d, logprobs: null, finish_reason: null }])
  await delta({ role: 'assistant', content: '' })
  if (reply.thinking !== undefined) for (const p of pieces(reply.thinking, 5)) await delta({ reasoning_content: p })
  if (reply.text !== undefined) for (const p of pieces(reply.text, 6)) await delta({ content: p })
  for (const [n, tool] of (reply.tools ?? []).entries()) {
    await delta({ tool_calls: [{ index: n, id: `call_${index}_${n}`, type: 'function', function: { name: tool.name, arguments: '' } }] })
    for (const p of pieces(JSON.stringify(tool.input), 7)) await delta({ tool_calls: [{ index: n, function: { arguments: p } }] })
  }
  const finish = reply.stop === 'max_tokens' ? 'length' : (reply.tools ?? []).length > 0 ? 'tool_calls' : 'stop'
  await chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: finish }])
  const usage = reply.usage ?? defaultUsage(index)
  await chunk([], { usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output } })
  await send(res, 'data: [DONE]\n\n')
}
