// A fake model provider: a real HTTP(S) server on loopback that answers with scripted replies in
// the providers' real wire formats — Anthropic Messages (`/v1/messages`), OpenAI Chat Completions
// (`/v1/chat/completions`), OpenAI Responses (`/v1/responses`, over server-sent events and in
// WebSocket mode) and Gemini (`/v1beta/models/{model}:streamGenerateContent?alt=sse`,
// `:generateContent`), each with its usage, its tool calls and its own error bodies (a 429 with
// Retry-After, a 500, a stream cut part-way; ./fake-model/). `corral dev` runs it with the demo
// script (./demo-script.ts) and the agent CLIs' script (./cli-script.ts); the tests with their own.
// It imports nothing from the control plane: it is only a server.
import http from 'node:http'
import https from 'node:https'
import type { AddressInfo } from 'node:net'
import type { Duplex } from 'node:stream'
import { WebSocketServer, type WebSocket } from 'ws'
import { anthropicCount, anthropicError, anthropicMessage, writeAnthropic } from './fake-model/anthropic.js'
import { CutStream, cutAfter, socketChannel, sseChannel, type Channel } from './fake-model/channel.js'
import { geminiCount, geminiError, geminiResponse, geminiRoute, writeGeminiStream } from './fake-model/gemini.js'
import { openAiCompletion, openAiError, writeOpenAiChat } from './fake-model/openai-chat.js'
import { ResponseHistory, responsesError, responsesSocketError, writeResponses } from './fake-model/openai-responses.js'
import { WIRE_APIS, type Script, type ScriptContext, type ScriptedReply, type SeenModelRequest, type WireFormat } from './fake-model/types.js'

export { WIRE_APIS, type Script, type ScriptContext, type ScriptedReply, type ScriptedTool, type SeenModelRequest, type WireFormat } from './fake-model/types.js'

/** Where each API is served (Gemini's model is a path segment). */
export const WIRE_PATHS: Readonly<Record<WireFormat, string>> = {
  anthropic: '/v1/messages',
  openai: '/v1/chat/completions',
  'openai-responses': '/v1/responses',
  gemini: '/v1beta/models/{model}:streamGenerateContent',
}

export interface FakeModelOptions {
  script: Script
  /** Serve HTTPS with this key pair; plain HTTP without. */
  tls?: { key: string; cert: string }
  /** Which APIs to answer (default all); any other path is a 404. */
  formats?: readonly WireFormat[]
  host?: string
  /** Default 0: a free port. */
  port?: number
  /** Keep every request seen (tests assert on them); off for long-running use, which would grow without bound. */
  record?: boolean
  /** When set, a request must carry this key (`x-api-key`, `Authorization: Bearer`, `x-goog-api-key` or `?key=`), or it is answered 401. */
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

/** Largest request body accepted; a CLI's first request (tools and system prompt) is tens of kilobytes. */
const MAX_BODY = 8 * 1024 * 1024

type Endpoint = { api: WireFormat; op: 'generate' | 'stream' | 'count'; model?: string }

/** What a method and path ask for, among the enabled APIs. */
function route(method: string, pathname: string, formats: readonly WireFormat[]): Endpoint | undefined {
  if (method !== 'POST') return undefined
  const on = (api: WireFormat, ep: Endpoint): Endpoint | undefined => (formats.includes(api) ? ep : undefined)
  if (pathname === '/v1/messages') return on('anthropic', { api: 'anthropic', op: 'generate' })
  if (pathname === '/v1/messages/count_tokens') return on('anthropic', { api: 'anthropic', op: 'count' })
  if (pathname === '/v1/chat/completions') return on('openai', { api: 'openai', op: 'generate' })
  if (pathname === '/v1/responses') return on('openai-responses', { api: 'openai-responses', op: 'generate' })
  const g = geminiRoute(pathname)
  if (!g) return undefined
  const op = g.method === 'streamGenerateContent' ? 'stream' : g.method === 'generateContent' ? 'generate' : g.method === 'countTokens' ? 'count' : undefined
  return op ? on('gemini', { api: 'gemini', op, model: g.model }) : undefined
}

/** The API's own error body for a status. */
function errorBody(api: WireFormat, status: number, message: string, retryAfter?: number): unknown {
  if (api === 'anthropic') return anthropicError(status, message)
  if (api === 'gemini') return geminiError(status, message, retryAfter)
  if (api === 'openai-responses') return responsesError(status, message)
  return openAiError(status, message)
}

const ERROR_MESSAGES: Record<number, string> = {
  400: 'Invalid request (scripted by the fake model).',
  429: 'Rate limit exceeded (scripted by the fake model); retry after the Retry-After delay.',
  500: 'Internal server error (scripted by the fake model).',
  529: 'Overloaded (scripted by the fake model).',
}

function carriesKey(req: http.IncomingMessage, url: URL, key: string): boolean {
  const h = req.headers
  return h['x-api-key'] === key || h.authorization === `Bearer ${key}` || h['x-goog-api-key'] === key || url.searchParams.get('key') === key
}

function replyJson(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers })
  res.end(JSON.stringify(body))
}

// long-function: one closure over the server's state (the request log, the Responses history, the
// count), shared by its HTTP and WebSocket handlers.
export async function startFakeModel(opts: FakeModelOptions): Promise<FakeModel> {
  const formats = opts.formats ?? WIRE_APIS
  const requests: SeenModelRequest[] = []
  const history = new ResponseHistory()
  let count = 0

  /** Runs the script for one request; a failing script is the API's 500. */
  const consult = (body: any, ctx: ScriptContext, path: string, headers: http.IncomingHttpHeaders): { scripted: ScriptedReply; index: number } => {
    const index = count++
    if (opts.record) requests.push({ path, headers, body, api: ctx.api, transport: ctx.transport })
    try {
      return { scripted: opts.script(body, index, ctx), index }
    } catch (err) {
      return { scripted: { status: 500, errorBody: errorBody(ctx.api, 500, `the script failed: ${(err as Error).message}`) }, index }
    }
  }

  const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const chunks: Buffer[] = []
    let size = 0
    req.on('data', (c: Buffer) => {
      size += c.length
      if (size > MAX_BODY) req.destroy()
      else chunks.push(c)
    })
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://fake-model')
      const ep = route(req.method ?? 'GET', url.pathname, formats)
      if (!ep) {
        const served = formats.map((f) => `POST ${WIRE_PATHS[f]}`).join(', ')
        return replyJson(res, 404, { type: 'error', error: { type: 'not_found_error', message: `the fake model answers ${served}` } })
      }
      if (opts.apiKey !== undefined && !carriesKey(req, url, opts.apiKey)) {
        return replyJson(res, 401, errorBody(ep.api, 401, 'missing or wrong API key (the proxy injects it from the credential)'))
      }
      let body: any
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
      } catch {
        return replyJson(res, 400, errorBody(ep.api, 400, 'the body is not JSON'))
      }
      if (ep.op === 'count') return replyJson(res, 200, ep.api === 'gemini' ? geminiCount(body) : anthropicCount(body))
      answerHttp(req, res, ep, url, body)
    })
  }

  const answerHttp = (req: http.IncomingMessage, res: http.ServerResponse, ep: Endpoint, url: URL, body: any): void => {
    const model = ep.model ?? String(body?.model ?? '')
    let expanded = body
    if (ep.api === 'openai-responses') {
      const input = history.expand(body)
      if (!input) return replyJson(res, 400, previousNotFound(body))
      expanded = { ...body, input }
    }
    const { scripted, index } = consult(expanded, { api: ep.api, model, transport: 'http' }, req.url ?? url.pathname, req.headers)
    if (scripted.status && scripted.status !== 200) {
      const headers: Record<string, string> = scripted.retryAfter !== undefined ? { 'retry-after': String(scripted.retryAfter) } : {}
      const message = ERROR_MESSAGES[scripted.status] ?? 'scripted failure'
      return replyJson(res, scripted.status, scripted.errorBody ?? errorBody(ep.api, scripted.status, message, scripted.retryAfter), headers)
    }
    const streaming = ep.api === 'gemini' ? ep.op === 'stream' : body?.stream === true
    if (!streaming) {
      if (scripted.cut) return void res.destroy()
      if (ep.api === 'anthropic') return replyJson(res, 200, anthropicMessage(scripted, index, body))
      if (ep.api === 'openai') return replyJson(res, 200, openAiCompletion(scripted, index, body))
      if (ep.api === 'gemini') return replyJson(res, 200, geminiResponse(scripted, index, model))
      // A non-streamed Responses request gets the completed response object: the stream's last event.
      return void collectResponse(scripted, index, expanded).then(({ id, response, output }) => {
        history.remember(id, [...(expanded.input as unknown[]), ...output])
        replyJson(res, 200, response)
      })
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
    let ch: Channel = sseChannel(res, { crlf: ep.api === 'gemini' })
    if (scripted.cut) ch = cutAfter(ch, 3)
    const write = async (): Promise<void> => {
      if (ep.api === 'anthropic') return writeAnthropic(ch, scripted, index, body)
      if (ep.api === 'openai') return writeOpenAiChat(ch, scripted, index, body)
      if (ep.api === 'gemini') return writeGeminiStream(ch, scripted, index, model)
      const { id, output } = await writeResponses(ch, scripted, index, body)
      history.remember(id, [...(expanded.input as unknown[]), ...output])
    }
    write().then(() => res.end(), (err) => (err instanceof CutStream ? undefined : res.destroy()))
  }

  const sockets = new WebSocketServer({ noServer: true, maxPayload: MAX_BODY })
  const onUpgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer): void => {
    const url = new URL(req.url ?? '/', 'http://fake-model')
    const refuse = (status: number, body: unknown): void => {
      const text = JSON.stringify(body)
      socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`)
    }
    if (url.pathname !== '/v1/responses' || !formats.includes('openai-responses')) return refuse(404, responsesError(404, 'the fake model takes WebSockets on /v1/responses only'))
    if (opts.apiKey !== undefined && !carriesKey(req, url, opts.apiKey)) return refuse(401, openAiError(401, 'missing or wrong API key'))
    sockets.handleUpgrade(req, socket, head, (ws) => serveSocket(ws, req))
  }

  /** Socket mode: one `response.create` at a time, each answered with the response's events. */
  const serveSocket = (ws: WebSocket, req: http.IncomingMessage): void => {
    let busy = Promise.resolve()
    ws.on('message', (data, isBinary) => {
      busy = busy.then(() => answerFrame(ws, req, isBinary ? undefined : data.toString()))
    })
  }

  const answerFrame = async (ws: WebSocket, req: http.IncomingMessage, text: string | undefined): Promise<void> => {
    const fail = (status: number, body: unknown, retryAfter?: number): void => ws.send(JSON.stringify(responsesSocketError(status, body, retryAfter)))
    let frame: any
    try {
      frame = JSON.parse(text ?? '')
    } catch {
      return fail(400, responsesError(400, 'a frame must be a JSON text frame'))
    }
    if (frame?.type !== 'response.create') return fail(400, responsesError(400, `unsupported frame type ${JSON.stringify(frame?.type)}; send response.create`))
    const { type: _type, ...rest } = frame
    const body = typeof frame.response === 'object' && frame.response !== null ? frame.response : rest
    const input = history.expand(body)
    if (!input) return fail(400, previousNotFound(body))
    const expanded = { ...body, input }
    const ch = socketChannel(ws)
    if (body.generate === false) {
      // A warm-up: the client opens the conversation without asking for output.
      const { id } = await writeResponses(ch, { usage: { input: 0, output: 0 } }, count, body).catch(() => ({ id: '' }))
      if (id) history.remember(id, input)
      return
    }
    const { scripted, index } = consult(expanded, { api: 'openai-responses', model: String(body.model ?? ''), transport: 'websocket' }, req.url ?? '/v1/responses', req.headers)
    if (scripted.status && scripted.status !== 200) {
      return fail(scripted.status, scripted.errorBody ?? responsesError(scripted.status, ERROR_MESSAGES[scripted.status] ?? 'scripted failure'), scripted.retryAfter)
    }
    try {
      const { id, output } = await writeResponses(scripted.cut ? cutAfter(ch, 3) : ch, scripted, index, body)
      history.remember(id, [...input, ...output])
    } catch {
      // The socket was cut (on purpose or by the client): nothing more to send.
    }
  }

  const server = opts.tls ? https.createServer(opts.tls, handler) : http.createServer(handler)
  server.on('upgrade', onUpgrade)
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
      for (const ws of sockets.clients) ws.terminate()
      sockets.close()
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
}

function previousNotFound(body: any): unknown {
  const id = String(body?.previous_response_id)
  return { error: { message: `Previous response with id '${id}' not found.`, type: 'invalid_request_error', param: 'previous_response_id', code: 'previous_response_not_found' } }
}

/** The completed response object of a non-streamed Responses request (the events' last payload). */
async function collectResponse(reply: ScriptedReply, index: number, body: any): Promise<{ id: string; response: unknown; output: unknown[] }> {
  let last: any
  const ch: Channel = { event: async (_n, data) => void (last = data), raw: async () => {}, cut: () => {} }
  const { id, output } = await writeResponses(ch, reply, index, body)
  return { id, response: last?.response, output }
}
