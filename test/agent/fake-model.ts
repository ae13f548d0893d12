// A fake model provider for agent tests: a real HTTP(S) server on loopback that answers with
// scripted replies in the providers' real streaming wire formats (Anthropic Messages SSE, OpenAI
// Chat Completions chunks). Events are written in several pieces, some split mid-line, so the
// agent's incremental parsing is exercised as with a real network.
import http from 'node:http'
import https from 'node:https'
import type { AddressInfo } from 'node:net'

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

export type Script = (body: any, index: number) => ScriptedReply

export interface FakeProvider {
  url: string
  requests: SeenModelRequest[]
  close(): Promise<void>
}

export function startFakeAnthropic(script: Script, tls?: { key: string; cert: string }): Promise<FakeProvider> {
  return serve(script, tls, '/v1/messages', writeAnthropic)
}

export function startFakeOpenAi(script: Script, tls?: { key: string; cert: string }): Promise<FakeProvider> {
  return serve(script, tls, '/v1/chat/completions', writeOpenAi)
}

async function serve(script: Script, tls: { key: string; cert: string } | undefined, path: string,
  write: (res: http.ServerResponse, reply: ScriptedReply, index: number, body: any) => Promise<void>): Promise<FakeProvider> {
  const requests: SeenModelRequest[] = []
  const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const chunks: Buffer[] = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== path) {
        res.statusCode = 404
        res.end()
        return
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
      const index = requests.length
      requests.push({ path: req.url, headers: req.headers, body })
      const reply = script(body, index)
      if (reply.status && reply.status !== 200) {
        res.writeHead(reply.status, { 'content-type': 'application/json' })
        res.end(JSON.stringify(reply.errorBody ?? { type: 'error', error: { type: 'api_error', message: 'scripted failure' } }))
        return
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
      void write(res, reply, index, body).then(() => res.end())
    })
  }
  const server = tls ? https.createServer(tls, handler) : http.createServer(handler)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  return {
    url: `${tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    requests,
    close: () => new Promise((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
}

/** Writes a payload in two pieces with a pause, so parsers see events split across reads. */
async function send(res: http.ServerResponse, payload: string): Promise<void> {
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

async function writeAnthropic(res: http.ServerResponse, reply: ScriptedReply, index: number, body: any): Promise<void> {
  const ev = (event: string, data: unknown): Promise<void> => send(res, `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)
  const usage = reply.usage ?? { input: 100 + index, output: 20 }
  await ev('message_start', {
    type: 'message_start',
    message: { id: `msg_fake_${index}`, type: 'message', role: 'assistant', model: body.model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: usage.input, output_tokens: 1 } },
  })
  await ev('ping', { type: 'ping' })
  let i = 0
  if (reply.thinking !== undefined) {
    await ev('content_block_start', { type: 'content_block_start', index: i, content_block: { type: 'thinking', thinking: '' } })
    for (const p of pieces(reply.thinking, 5)) await ev('content_block_delta', { type: 'content_block_delta', index: i, delta: { type: 'thinking_delta', thinking: p } })
    await ev('content_block_delta', { type: 'content_block_delta', index: i, delta: { type: 'signature_delta', signature: `sig-${index}` } })
    await ev('content_block_stop', { type: 'content_block_stop', index: i })
    i++
  }
  if (reply.text !== undefined) {
    await ev('content_block_start', { type: 'content_block_start', index: i, content_block: { type: 'text', text: '' } })
    for (const p of pieces(reply.text, 6)) await ev('content_block_delta', { type: 'content_block_delta', index: i, delta: { type: 'text_delta', text: p } })
    await ev('content_block_stop', { type: 'content_block_stop', index: i })
    i++
  }
  for (const [n, tool] of (reply.tools ?? []).entries()) {
    await ev('content_block_start', { type: 'content_block_start', index: i, content_block: { type: 'tool_use', id: `toolu_${index}_${n}`, name: tool.name, input: {} } })
    await ev('content_block_delta', { type: 'content_block_delta', index: i, delta: { type: 'input_json_delta', partial_json: '' } })
    for (const p of pieces(JSON.stringify(tool.input), 7)) await ev('content_block_delta', { type: 'content_block_delta', index: i, delta: { type: 'input_json_delta', partial_json: p } })
    await ev('content_block_stop', { type: 'content_block_stop', index: i })
    i++
  }
  const stop = reply.stop ?? ((reply.tools ?? []).length > 0 ? 'tool_use' : 'end_turn')
  await ev('message_delta', { type: 'message_delta', delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: usage.output } })
  await ev('message_stop', { type: 'message_stop' })
}

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
  const usage = reply.usage ?? { input: 100 + index, output: 20 }
  await chunk([], { usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output } })
  await send(res, 'data: [DONE]\n\n')
}
