// GET /v1/workspaces/{id}/logs: the agent's own output (stdout and stderr, combined), which the
// replica running the agent copies into the database (src/workspaces/log-shipper.ts), so any
// replica answers. A documented addition (docs/api.md "Agent output"): permission `workspace:read`
// or `workspace:read:own` (creator match), another org's workspace is `workspace_not_found`.
// Plain text (default) or NDJSON chunks, paged by `after` (the last chunk's seq, answered in the
// `corral-log-next` header) and capped by `limit_bytes`; `follow=true` is SSE (`event: log`,
// `id: <seq>`, resumable with Last-Event-ID), polled from the database every FOLLOW_POLL_MS.
import type { ServerResponse } from 'node:http'
import type { FastifyInstance, FastifyReply } from 'fastify'
import { apiError } from '../../contract/index.js'
import { workspaceLogs, type LogChunk, type WorkspaceLogs } from '../../store/index.js'
import { idParams } from '../schemas/common.js'
import type { ServerDeps } from '../types.js'
import { requireWorkspace } from '../workspace-access.js'

const READ = [['workspace:read', 'workspace:read:own']] as const
export const LOGS_DEFAULT_BYTES = 1024 * 1024
export const LOGS_MAX_BYTES = 4 * 1024 * 1024
const FOLLOW_POLL_MS = 500
const DEFAULT_HEARTBEAT_MS = 15_000
const DEFAULT_MAX_DURATION_MS = 60 * 60 * 1000

type LogsQuery = { after?: string; limit_bytes?: string; format?: 'text' | 'ndjson'; follow?: string; api_key?: string; last_event_id?: string }

const querystring = {
  type: 'object', additionalProperties: false,
  properties: {
    after: { type: 'string', pattern: '^[0-9]{1,15}$', description: 'Only chunks after this seq (the corral-log-next header of the previous page).' },
    limit_bytes: { type: 'string', pattern: '^[0-9]{1,8}$', description: `At most this many bytes of text (default ${LOGS_DEFAULT_BYTES}, at most ${LOGS_MAX_BYTES}).` },
    format: { type: 'string', enum: ['text', 'ndjson'], description: 'text/plain (default) or one JSON chunk {seq, at, text} per line.' },
    follow: { type: 'string', enum: ['true', 'false'], description: 'true: a text/event-stream of `event: log` frames until the client leaves.' },
    last_event_id: { type: 'string', pattern: '^[0-9]{1,15}$', description: 'Resume after this seq (as the Last-Event-ID header).' },
    api_key: { type: 'string', description: 'The token, for browser EventSource clients (as on the activity streams).' },
  },
} as const

const chunkSchema = { type: 'object', required: ['seq', 'at', 'text'], properties: { seq: { type: 'integer' }, at: { type: 'string', format: 'date-time' }, text: { type: 'string' } } }

const LOGS_DOC = {
  response: {
    200: {
      description: 'The agent output after `after`, oldest first: text/plain (headers corral-log-next: the last seq sent, corral-log-truncated: true when older output was trimmed by retention), application/x-ndjson chunks, or with follow=true text/event-stream frames `event: log`, `id: <seq>`, `data: <chunk JSON>` with heartbeat comments.',
      content: {
        'text/plain': { schema: { type: 'string' } },
        'application/x-ndjson': { schema: chunkSchema },
        'text/event-stream': { schema: { type: 'string' } },
      },
    },
  },
}

function seqOf(value: string | undefined, name: string): number | undefined {
  if (value === undefined || value === '') return undefined
  if (!/^[0-9]{1,15}$/.test(value)) throw apiError('validation_error', `${name} must be a log chunk seq (a non-negative integer)`, { fields: { [name]: 'must be a non-negative integer' } })
  return Number(value)
}

export async function workspaceLogRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  const logs = workspaceLogs(deps.store)
  const open = new Set<ServerResponse>()
  app.addHook('preClose', async () => {
    for (const res of open) res.end()
  })

  app.get<{ Params: { id: string }; Querystring: LogsQuery }>(
    '/workspaces/:id/logs',
    { config: { permission: READ, queryCredential: true, openapi: LOGS_DOC }, schema: { params: idParams, querystring } },
    async (request, reply) => {
      const ws = await requireWorkspace(deps, request, request.params.id)
      const q = request.query
      const maxBytes = Math.min(LOGS_MAX_BYTES, Math.max(1, Number(q.limit_bytes ?? LOGS_DEFAULT_BYTES)))
      const header = request.headers['last-event-id']
      const after = seqOf(typeof header === 'string' && header !== '' ? header : q.last_event_id, 'Last-Event-ID') ?? seqOf(q.after, 'after') ?? 0
      if (q.follow === 'true') {
        reply.hijack()
        open.add(reply.raw)
        reply.raw.once('close', () => open.delete(reply.raw))
        await follow(logs, ws.id, after, reply, { 'x-request-id': String(request.id) }, deps.config.stream ?? {})
        return
      }
      const page = await logs.read(ws.id, { after, maxBytes })
      reply.header('corral-log-next', String(page.chunks.at(-1)?.seq ?? after))
      if (page.truncated) reply.header('corral-log-truncated', 'true')
      reply.header('cache-control', 'no-store')
      if (q.format === 'ndjson') {
        reply.type('application/x-ndjson; charset=utf-8')
        return page.chunks.map((c) => JSON.stringify(c) + '\n').join('')
      }
      reply.type('text/plain; charset=utf-8')
      return page.chunks.map((c) => c.text).join('')
    },
  )
}

/** The SSE answer: every chunk after `after`, then new ones as they are stored, until the client leaves or the maximum duration passes. */
async function follow(logs: WorkspaceLogs, workspaceId: string, after: number, reply: FastifyReply, headers: Record<string, string>,
  tuning: { heartbeatMs?: number; maxDurationMs?: number }): Promise<void> {
  const res = reply.raw
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive', 'x-accel-buffering': 'no', ...headers })
  res.write('retry: 2000\n\n')
  let closed = false
  let last = after
  const end = (): void => {
    closed = true
    res.end()
  }
  res.once('close', () => { closed = true })
  const heartbeat = setInterval(() => res.write(': heartbeat\n\n'), tuning.heartbeatMs ?? DEFAULT_HEARTBEAT_MS).unref()
  const deadline = setTimeout(end, tuning.maxDurationMs ?? DEFAULT_MAX_DURATION_MS).unref()
  const send = (c: LogChunk, skipped: boolean): void => {
    res.write(`event: log\nid: ${c.seq}\ndata: ${JSON.stringify(skipped ? { ...c, skipped: true } : c)}\n\n`)
  }
  try {
    // Bounded by the client: the loop ends when it leaves, the server closes, or the deadline passes.
    while (!closed) {
      const page = await logs.read(workspaceId, { after: last, maxBytes: LOGS_DEFAULT_BYTES }).catch(() => undefined)
      if (page) {
        page.chunks.forEach((c, i) => send(c, i === 0 && page.truncated))
        last = page.chunks.at(-1)?.seq ?? last
      }
      // A slow reader is not buffered without bound: wait for the socket to drain first.
      if (res.writableNeedDrain) await new Promise((r) => res.once('drain', r).once('close', r))
      if (!page || page.chunks.length === 0) await new Promise((r) => setTimeout(r, FOLLOW_POLL_MS).unref())
    }
  } finally {
    clearInterval(heartbeat)
    clearTimeout(deadline)
  }
}
