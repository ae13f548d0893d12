// Budgets through the proxy with real sockets: ceilings under concurrency, max_concurrent, SSE
// streams metered as they pass (LLM-style usage events, [DONE] sentinel, cut streams), every
// floored reason, task scope, and ledgers that survive a restart.
import { readFileSync } from 'node:fs'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { AuditEvent } from '../../src/contract/index.js'
import { startHarness, type Harness } from './harness.js'

const CAPS = readFileSync(new URL('./budget-caps.yaml', import.meta.url), 'utf8')

const sse = (event: string | undefined, data: unknown): string =>
  `${event ? `event: ${event}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`

let release: (() => void) | undefined
let gate: Promise<void> = Promise.resolve()

function upstream(req: IncomingMessage, res: ServerResponse): void {
  const path = req.url!.split('?')[0]!
  req.resume()
  const stream = (status = 200, extra: Record<string, string> = {}) => res.writeHead(status, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...extra })
  switch (path) {
    case '/slow':
      setTimeout(() => res.end('slow'), 300)
      return
    case '/v1/messages':
      stream()
      res.write(sse('message_start', { type: 'message_start', message: { usage: { input_tokens: 10, output_tokens: 1 } } }))
      void gate.then(() => {
        for (let i = 0; i < 5; i++) res.write(sse('content_block_delta', { type: 'content_block_delta', delta: { text: `t${i}` } }))
        res.write(sse('message_delta', { type: 'message_delta', usage: { output_tokens: 142 } }))
        res.end(sse('message_stop', { type: 'message_stop' }))
      })
      return
    case '/v1/cut':
      stream()
      res.write(sse('message_delta', { type: 'message_delta', usage: { output_tokens: 12 } }))
      setTimeout(() => res.socket!.destroy(), 20)
      return
    case '/v1/json':
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ usage: { output_tokens: 99 } }))
      return
    case '/v1/gzip':
      stream(200, { 'content-encoding': 'gzip' })
      res.end(sse('message_stop', {}))
      return
    case '/oai/ok':
      stream()
      res.write(sse(undefined, { choices: [], usage: { completion_tokens: 5 } }))
      res.end(sse(undefined, '[DONE]'))
      return
    case '/oai/bad':
      stream()
      res.write(sse(undefined, 'not json'))
      res.end(sse(undefined, '[DONE]'))
      return
    case '/oai/noval':
      stream()
      res.write(sse(undefined, { choices: [] }))
      res.end(sse(undefined, '[DONE]'))
      return
    case '/doc/ok':
      res.writeHead(200, { 'content-type': 'application/json', 'x-cost': '3' })
      res.end(JSON.stringify({ usage: { total_tokens: 30 } }))
      return
    case '/doc/text':
      res.writeHead(200, { 'content-type': 'text/plain', 'x-cost': '1' })
      res.end('{"usage":{"total_tokens":30}}')
      return
    case '/doc/bad':
      res.writeHead(200, { 'content-type': 'application/json', 'x-cost': '1' })
      res.end('{"usage":')
      return
    default:
      res.end('ok')
  }
}

describe('budgets (real policy, real sockets, SQLite ledgers)', () => {
  let h: Harness
  let ws: { workspaceId: string; token: string }
  let before = 0
  const base = (): string => `https://127.0.0.1:${h.up.httpsPort}`
  const newRows = async (n: number): Promise<AuditEvent[]> => (await h.audit.waitForDecisions(before + n)).slice(before)
  const post = (path: string) => h.fetch(`${base()}${path}`, { token: ws.token, method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } })

  beforeAll(async () => {
    h = await startHarness()
    h.up.handler.current = upstream
    ws = await h.workspace(CAPS)
  })
  afterAll(async () => {
    await h.close()
  })
  beforeEach(() => {
    before = h.audit.decisions().length
  })

  it('a ceiling holds under 12 parallel requests: exactly 5 pass, the rest are budget_exhausted with counter and scope', async () => {
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => h.fetch(`${base()}/count/${i}`, { token: ws.token })))
    expect(results.filter((r) => r.status === 200)).toHaveLength(5)
    const denied = results.filter((r) => r.status !== 200)
    expect(denied).toHaveLength(7)
    for (const d of denied) expect(JSON.parse(d.body).error).toMatchObject({ reason: 'budget_exhausted', capability: 'calls' })
    const rows = await newRows(12)
    const allows = rows.filter((r) => r.decision === 'allow')
    expect(allows).toHaveLength(5)
    for (const a of allows) expect(a).toMatchObject({ capability_name: 'calls', debits: { calls: 1 }, floored: {} })
    // budget_state is the snapshot at commit: it includes what other in-flight requests hold.
    for (const a of allows) expect(a.budget_state!.calls).toMatchObject({ workspace: { max: 5, used: expect.any(Number) } })
    for (const d of rows.filter((r) => r.decision === 'deny')) expect(d).toMatchObject({ reason: 'budget_exhausted', phase: 'request_body', detail: { counter: 'calls', scope: 'workspace' } })
  })

  it('the task scope has its own, smaller ceiling', async () => {
    const other = await h.workspace(CAPS)
    const task1 = await h.task(other.workspaceId)
    const t1 = await h.token(other.workspaceId, { task: task1 })
    const statuses: number[] = []
    for (let i = 0; i < 3; i++) statuses.push((await h.fetch(`${base()}/count/t`, { token: t1 })).status)
    expect(statuses).toEqual([200, 200, 429])
    const rows = await newRows(3)
    expect(rows[2]).toMatchObject({ reason: 'budget_exhausted', task_id: task1, detail: { counter: 'calls', scope: 'task' } })
    const t2 = await h.token(other.workspaceId, { task: await h.task(other.workspaceId) })
    expect((await h.fetch(`${base()}/count/t`, { token: t2 })).status).toBe(200)
  })

  it('max_concurrent: 2 in flight at once, the others are concurrency_exhausted', async () => {
    const results = await Promise.all(Array.from({ length: 5 }, () => h.fetch(`${base()}/slow`, { token: ws.token })))
    expect(results.filter((r) => r.status === 200)).toHaveLength(2)
    const rows = await newRows(5)
    const denied = rows.filter((r) => r.decision === 'deny')
    expect(denied).toHaveLength(3)
    for (const d of denied) expect(d).toMatchObject({ reason: 'concurrency_exhausted', detail: { counter: 'inflight', scope: 'workspace' } })
    // Released at the end: the next one passes.
    expect((await h.fetch(`${base()}/slow`, { token: ws.token })).status).toBe(200)
  })

  it('SSE passes through as it arrives and is metered from message_delta (max accumulator)', async () => {
    gate = new Promise((r) => (release = r))
    const res = await h.open(`${base()}/v1/messages`, { token: ws.token, method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } })
    const reader = res.body!.getReader()
    const first = new TextDecoder().decode((await reader.read()).value)
    // The upstream is still holding the rest of the stream: this event was relayed, not buffered.
    expect(first).toContain('message_start')
    release!()
    let rest = ''
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      rest += new TextDecoder().decode(value)
    }
    expect(rest).toContain('message_stop')
    const [row] = await newRows(1)
    expect(row).toMatchObject({ decision: 'allow', capability_name: 'anthropic', phase: 'response_body', debits: { tokens: 142 }, floored: {} })
    expect(row!.budget_state).toMatchObject({ tokens: { workspace: { used: 142, max: 300 } } })
  })

  it('floored: terminator_not_observed (cut stream), framing_mismatch, encoding_mismatch', async () => {
    ws = await h.workspace(CAPS) // a fresh 300-token ceiling
    await post('/v1/cut').catch(() => undefined)
    await post('/v1/json')
    await post('/v1/gzip').catch(() => undefined) // the client cannot gunzip a fake body; the proxy still meters
    const rows = await newRows(3)
    expect(rows.map((r) => [r.debits, r.floored])).toEqual([
      [{ tokens: 50 }, { tokens: 'terminator_not_observed' }],
      [{ tokens: 50 }, { tokens: 'framing_mismatch' }],
      [{ tokens: 50 }, { tokens: 'encoding_mismatch' }],
    ])
  })

  it('floored: extracted_below_failure_charge, parse_failed, cel_eval_error ([DONE] sentinel streams)', async () => {
    for (const p of ['/oai/ok', '/oai/bad', '/oai/noval']) expect((await post(p)).status).toBe(200)
    const rows = await newRows(3)
    expect(rows.map((r) => r.floored)).toEqual([
      { completion: 'extracted_below_failure_charge' }, { completion: 'parse_failed' }, { completion: 'cel_eval_error' },
    ])
    for (const r of rows) expect(r.debits).toEqual({ completion: 20 })
  })

  it('single documents, response.bytes and header counters; format_mismatch and parse_failed floors', async () => {
    for (const p of ['/doc/ok', '/doc/text', '/doc/bad']) await h.fetch(`${base()}${p}`, { token: ws.token })
    const rows = await newRows(3)
    expect(rows[0]).toMatchObject({ debits: { doc_tokens: 30, bytes: JSON.stringify({ usage: { total_tokens: 30 } }).length, hdr: 3 }, floored: {} })
    expect(rows[1]!.floored).toEqual({ doc_tokens: 'format_mismatch' })
    expect(rows[2]!.floored).toEqual({ doc_tokens: 'parse_failed' })
    expect(rows[1]!.debits!.doc_tokens).toBe(7)
  })

  it('a token ceiling: once debits pass the max, admission refuses (the reserve is held meanwhile)', async () => {
    const fresh = await h.workspace(CAPS)
    const p = () => h.fetch(`${base()}/v1/cut`, { token: fresh.token, method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } }).catch(() => undefined)
    gate = Promise.resolve()
    // 300 max, each cut stream costs 50 → after 6, the next is refused (reserve 100 > remaining 0).
    for (let i = 0; i < 6; i++) await p()
    before = h.audit.decisions().length
    const res = await h.fetch(`${base()}/v1/messages`, { token: fresh.token, method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } })
    expect(res.status).toBe(429)
    const [row] = await newRows(1)
    expect(row).toMatchObject({ reason: 'budget_exhausted', detail: { counter: 'tokens', scope: 'workspace' } })
  })

  it('ledgers survive a restart: the spent request.count ceiling stays spent', async () => {
    const fresh = await h.workspace(CAPS)
    for (let i = 0; i < 4; i++) expect((await h.fetch(`${base()}/count/r`, { token: fresh.token })).status).toBe(200)
    await h.restart()
    const token = await h.token(fresh.workspaceId)
    expect((await h.fetch(`${base()}/count/r`, { token })).status).toBe(200)
    expect((await h.fetch(`${base()}/count/r`, { token })).status).toBe(429)
  })
})
