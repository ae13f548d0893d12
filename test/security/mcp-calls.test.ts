// Class: MCP calls past the typed policy. A hostile agent talks JSON-RPC to an MCP server through
// the proxy and tries to run a tool, read a resource or see a tool the policy does not allow. Before
// this, the proxy saw one POST to /mcp and let the body through whole. Shapes: a refused call hidden
// in a batch (first, last, beside allowed ones, as a notification); a tool name in another case,
// full-width, Cyrillic, with a zero-width or trailing space; arguments off the declared schema
// (wrong type, missing, extra, not an object); duplicate keys (raw, escaped, at the top and in
// params); content types the proxy does not read (request and answer, and a compressed answer);
// bodies over the inspection limit; a tools/call sent as a notification; an SSE answer that hides
// a tool in a list (event split across writes, CRLF framing, a GET stream's replay) or carries an
// event that is not JSON; a message in the body of a GET or DELETE. Every attempt is refused before the server sees it, or cut (fail closed).
import type { IncomingMessage, ServerResponse } from 'node:http'
import { gzipSync } from 'node:zlib'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { compilePolicy } from '../../src/policy/index.js'
import { startHarness, type Harness } from '../proxy/harness.js'
import { connectRequest } from './raw.js'
import { MCP_CAPS, mcpRows } from '../proxy/mcp-upstream.js'

interface Seen {
  method: string
  headers: IncomingMessage['headers']
  body: string
}

describe('MCP calls past the typed policy', () => {
  let h: Harness
  let token: string
  let url: string
  const seen: Seen[] = []
  /** What the stand-in server answers (a real HTTPS server on loopback: the harness upstream). */
  let answer: (req: IncomingMessage, res: ServerResponse, body: string) => void
  const jsonResult = (req: IncomingMessage, res: ServerResponse, body: string): void => {
    const msgs = JSON.parse(body) as { id?: number }[] | { id?: number }
    const results = (Array.isArray(msgs) ? msgs : [msgs]).filter((m) => m.id !== undefined).map((m) => ({ jsonrpc: '2.0', id: m.id, result: { content: [] } }))
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify(Array.isArray(msgs) ? results : results[0]))
  }
  beforeAll(async () => {
    h = await startHarness({ maxInspectBytes: 64 * 1024 })
    h.up.handler.current = (req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c)).on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8')
        seen.push({ method: req.method!, headers: req.headers, body })
        answer(req, res, body)
      })
    }
    token = (await h.workspace(MCP_CAPS)).token
    url = `https://127.0.0.1:${h.up.httpsPort}/mcp`
  })
  afterAll(() => h?.close())

  const post = (body: string, headers: Record<string, string> = {}) =>
    h.fetch(url, { token, method: 'POST', body, headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers } })
  const call = (id: number | string, name: string, args: unknown = { message: 'hi' }) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } })

  describe('a refused call hidden in a batch', () => {
    it.each([
      ['last', [call(1, 'echo'), call(2, 'delete_repo', { repo: 'x' })], 1],
      ['first', [call(1, 'delete_repo', { repo: 'x' }), call(2, 'echo')], 0],
      ['between allowed ones', [call(1, 'echo'), call(2, 'delete_repo', { repo: 'x' }), call(3, 'add', { a: 1, b: 2 })], 1],
    ])('%s: nothing of the batch is forwarded; every request gets its error and every message its row', async (_shape, batch, refused) => {
      answer = jsonResult
      const before = seen.length
      const rowsBefore = h.audit.decisions().length
      const res = await post(JSON.stringify(batch))
      expect(res.status).toBe(200)
      const errors = JSON.parse(res.body) as { id: number; error: { code: number; message: string } }[]
      expect(errors.map((e) => e.id)).toEqual(batch.map((m) => m.id))
      expect(errors[refused]!.error.message).toMatch(/tool "delete_repo" is not allowed/)
      for (const [i, e] of errors.entries()) if (i !== refused) expect(e.error.message).toMatch(/another message in this batch was refused/)
      expect(seen.length).toBe(before)
      const rows = (await h.audit.waitForDecisions(rowsBefore + batch.length)).slice(rowsBefore)
      expect(rows).toHaveLength(batch.length)
      expect(rows.every((r) => r.decision === 'deny')).toBe(true)
      expect(rows.map((r) => r.detail?.mcp_batch_index).sort()).toEqual(batch.map((_m, i) => i))
      expect(rows.find((r) => r.detail?.mcp_tool === 'delete_repo')).toMatchObject({ reason: 'no_match', detail: { mcp_batch: batch.length } })
    })

    it('a tools/call notification inside a batch refuses the batch', async () => {
      const before = seen.length
      const { id: _drop, ...note } = call(9, 'echo')
      const res = await post(JSON.stringify([call(1, 'echo'), note]))
      expect(res.status).toBe(200)
      expect(JSON.parse(res.body)).toHaveLength(1)
      expect(seen.length).toBe(before)
    })

    it('an allowed batch is forwarded whole, one row per message', async () => {
      answer = jsonResult
      const rowsBefore = h.audit.decisions().length
      const res = await post(JSON.stringify([call(1, 'echo'), call(2, 'add', { a: 1, b: 2 }), { jsonrpc: '2.0', method: 'notifications/initialized' }]))
      expect(res.status).toBe(200)
      expect(JSON.parse(res.body)).toHaveLength(2)
      const rows = (await h.audit.waitForDecisions(rowsBefore + 3)).slice(rowsBefore)
      expect(rows.map((r) => [r.decision, r.detail?.mcp_method, r.detail?.mcp_tool ?? null]).sort()).toEqual([
        ['allow', 'notifications/initialized', null],
        ['allow', 'tools/call', 'add'],
        ['allow', 'tools/call', 'echo'],
      ])
    })
  })

  it.each([
    ['another case', 'Echo'],
    ['all caps', 'ECHO'],
    ['full-width e (NFKC folds it to "echo")', 'ｅcho'],
    ['Cyrillic е', 'еcho'],
    ['a zero-width space', 'echo\u200b'],
    ['a trailing space', 'echo '],
    ['a combining mark', 'ech\u006f\u0301'],
  ])('a tool name with %s does not match the allow for "echo"', async (_shape, name) => {
    answer = jsonResult
    const before = seen.length
    const res = await post(JSON.stringify(call(7, name)))
    expect(res.status).toBe(200)
    expect(JSON.parse(res.body)).toMatchObject({ id: 7, error: { code: -32001 } })
    expect(seen.length).toBe(before)
    expect(mcpRows(h.audit.decisions(), 'tools/call').at(-1)).toMatchObject({ decision: 'deny', reason: 'no_match', detail: { mcp_tool: name } })
  })

  it.each([
    ['a wrong type', { message: 42 }],
    ['a missing required field', { times: 1 }],
    ['an extra field', { message: 'hi', cmd: 'rm -rf /' }],
    ['an integer field given a fraction', { message: 'hi', times: 0.5 }],
    ['arguments that are not an object', ['hi']],
  ])('arguments with %s are refused as invalid params and not forwarded', async (_shape, args) => {
    const before = seen.length
    const res = await post(JSON.stringify(call(8, 'echo', args)))
    expect(JSON.parse(res.body)).toMatchObject({ id: 8, error: { code: -32602 } })
    expect(seen.length).toBe(before)
    expect(mcpRows(h.audit.decisions(), 'tools/call').at(-1)).toMatchObject({ decision: 'deny', reason: 'schema_violation' })
  })

  it.each([
    ['"name" twice, the allowed one first', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"delete_repo","arguments":{"message":"hi"}}}'],
    ['"name" twice, the allowed one last', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_repo","name":"echo","arguments":{"message":"hi"}}}'],
    ['"name" and an escaped "n\\u0061me"', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","n\\u0061me":"delete_repo","arguments":{"message":"hi"}}}'],
    ['"method" twice', '{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"delete_repo"}}'],
    ['a duplicate inside the arguments', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi","message":"bye"}}}'],
  ])('a body with %s is refused as a parse error', async (_shape, body) => {
    const before = seen.length
    const res = await post(body)
    expect(res.status).toBe(400)
    expect(JSON.parse(res.body)).toMatchObject({ id: null, error: { code: -32700 } })
    expect(res.body).toMatch(/duplicate key/)
    expect(seen.length).toBe(before)
    expect(h.audit.decisions().at(-1)).toMatchObject({ decision: 'deny', reason: 'invalid_json' })
  })

  it('a body that is not valid UTF-8 is refused as a parse error, not forwarded', async () => {
    const before = seen.length
    const bytes = Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ech'), Buffer.from([0xc3, 0x28]), Buffer.from('o","arguments":{"message":"hi"}}}')])
    const res = await h.fetch(url, { token, method: 'POST', body: bytes as unknown as string, headers: { 'content-type': 'application/json' } })
    expect(res.status).toBe(400)
    expect(JSON.parse(res.body)).toMatchObject({ id: null, error: { code: -32700 } })
    expect(seen.length).toBe(before)
  })

  it.each([
    ['text/plain', 'text/plain'],
    ['no content type', ''],
    ['form encoding', 'application/x-www-form-urlencoded'],
    ['JSON in UTF-16', 'application/json; charset=utf-16'],
  ])('a POST sent as %s is refused (415) and not forwarded', async (_shape, type) => {
    const before = seen.length
    const res = await post(JSON.stringify(call(1, 'echo')), type ? { 'content-type': type } : { 'content-type': '' })
    expect(res.status).toBe(415)
    expect(seen.length).toBe(before)
    expect(h.audit.decisions().at(-1)).toMatchObject({ decision: 'deny', reason: 'format_mismatch' })
  })

  it('a compressed POST is refused (415), not forwarded', async () => {
    const before = seen.length
    const res = await h.fetch(url, { token, method: 'POST', body: gzipSync(JSON.stringify(call(1, 'delete_repo', { repo: 'x' }))) as unknown as string, headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' } })
    expect(res.status).toBe(415)
    expect(seen.length).toBe(before)
  })

  it('a batch of more than 100 messages is refused, not forwarded, with one row', async () => {
    const before = seen.length
    const rowsBefore = h.audit.decisions().length
    const res = await post(JSON.stringify(Array.from({ length: 101 }, () => ({ jsonrpc: '2.0', method: 'notifications/initialized' }))))
    expect(res.status).toBe(400)
    expect(JSON.parse(res.body)).toMatchObject({ id: null, error: { code: -32600 } })
    expect(seen.length).toBe(before)
    expect((await h.audit.waitForDecisions(rowsBefore + 1)).length).toBe(rowsBefore + 1)
  })

  it.each([
    ['text/html', (res: ServerResponse) => (res.writeHead(200, { 'content-type': 'text/html' }), res.end('{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"delete_repo"}]}}'))],
    ['no content type', (res: ServerResponse) => (res.writeHead(200), res.end('{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"delete_repo"}]}}'))],
    ['gzip', (res: ServerResponse) => (res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' }), res.end(gzipSync('{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"delete_repo"}]}}')))],
  ])('an answer the proxy cannot read (%s) reaches the agent as a 502, none of its bytes', async (_shape, write) => {
    answer = (_req, res) => write(res)
    const res = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }))
    expect(res.status).toBe(502)
    expect(res.body).not.toMatch(/delete_repo/)
  })

  it('a body over the inspection limit is refused (413) with a JSON-RPC error, not forwarded', async () => {
    const before = seen.length
    const res = await post(JSON.stringify(call(1, 'echo', { message: `hi${'x'.repeat(70 * 1024)}` })))
    expect(res.status).toBe(413)
    expect(JSON.parse(res.body)).toMatchObject({ id: null, error: { code: -32600 } })
    expect(seen.length).toBe(before)
  })

  it.each([
    ['tools/call without an id', { jsonrpc: '2.0', method: 'tools/call', params: { name: 'echo', arguments: { message: 'hi' } } }, 400],
    ['resources/read without an id', { jsonrpc: '2.0', method: 'resources/read', params: { uri: 'docs://readme' } }, 400],
    ['a notification method with an id', { jsonrpc: '2.0', id: 3, method: 'notifications/initialized' }, 200],
    ['a null id', { jsonrpc: '2.0', id: null, method: 'tools/call', params: { name: 'echo', arguments: { message: 'hi' } } }, 400],
    ['JSON-RPC 1.0', { id: 3, method: 'tools/call', params: { name: 'echo', arguments: { message: 'hi' } } }, 400],
  ])('%s is refused and not forwarded', async (_shape, msg, status) => {
    const before = seen.length
    const res = await post(JSON.stringify(msg))
    expect(res.status).toBe(status)
    expect(JSON.parse(res.body)).toHaveProperty('error')
    expect(seen.length).toBe(before)
  })

  describe('a tool hidden in an SSE answer', () => {
    const listResult = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { tools: [{ name: 'echo', inputSchema: { type: 'object' } }, { name: 'delete_repo', inputSchema: { type: 'object' } }, { name: 'ｅcho', inputSchema: { type: 'object' } }] } })

    it.each([
      ['one event', (res: ServerResponse) => res.end(`event: message\ndata: ${listResult}\n\n`)],
      ['an event split across writes, CRLF framing, a priming event first', (res: ServerResponse) => {
        res.write('id: 0\r\ndata: \r\n\r\n')
        const ev = `event: message\r\nid: 1\r\ndata: ${listResult}\r\n\r\n`
        res.write(ev.slice(0, 40))
        setTimeout(() => res.end(ev.slice(40)), 20)
      }],
      ['data split over several data lines', (res: ServerResponse) => res.end(`data: ${listResult.slice(0, listResult.indexOf(',"result"'))}\ndata: ${listResult.slice(listResult.indexOf(',"result"'))}\n\n`)],
    ])('%s: the list is cut to the allowed tools', async (_shape, write) => {
      answer = (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        write(res)
      }
      const res = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }))
      expect(res.status).toBe(200)
      expect(res.body).not.toMatch(/delete_repo|ｅcho/)
      const data = res.body.split(/\r?\n/).filter((l) => l.startsWith('data:') && l.length > 6).map((l) => l.slice(5).trim())
      expect(JSON.parse(data.join(''))).toMatchObject({ id: 1, result: { tools: [{ name: 'echo' }] } })
    })

    it('a list replayed on the GET event stream is cut too', async () => {
      answer = (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.end(`id: 7\ndata: ${listResult}\n\n`)
      }
      const res = await h.fetch(url, { token, method: 'GET', headers: { accept: 'text/event-stream' } })
      expect(res.status).toBe(200)
      expect(res.body).not.toMatch(/delete_repo/)
      expect(res.body).toMatch(/"echo"/)
    })

    // An SSE event read whole in one chunk is still filtered; one the filter would have to hold past
    // the limit cuts the stream. Either way nothing unfiltered reaches the agent.
    it.each([
      ['an SSE event', 'text/event-stream', (big: string) => `data: ${big}\n\n`, undefined],
      ['a JSON answer', 'application/json', (big: string) => big, false],
    ])('%s over the inspection limit never reaches the agent unfiltered', async (_shape, type, frame, ok) => {
      const big = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { tools: [{ name: 'delete_repo', description: 'x'.repeat(70 * 1024) }] } })
      answer = (_req, res) => {
        res.writeHead(200, { 'content-type': type })
        res.end(frame(big))
      }
      const out = await h.open(url, { token, method: 'POST', body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), headers: { 'content-type': 'application/json' } }).then(
        async (r) => r.text().then((t) => ({ ok: r.status === 200, t }), () => ({ ok: false, t: '' })),
        () => ({ ok: false, t: '' }),
      )
      expect(out.t).not.toMatch(/delete_repo/)
      if (ok !== undefined) expect(out.ok).toBe(ok)
    })

    it('an SSE event that grows past the inspection limit across writes cuts the stream', async () => {
      const big = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { tools: [{ name: 'delete_repo', description: 'x'.repeat(90 * 1024) }] } })
      answer = (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.write(`data: ${big.slice(0, 40 * 1024)}`)
        setTimeout(() => res.write(big.slice(40 * 1024, 80 * 1024)), 30)
        setTimeout(() => res.end(`${big.slice(80 * 1024)}\n\n`), 60)
      }
      const out = await h.open(url, { token, method: 'POST', body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), headers: { 'content-type': 'application/json' } }).then(
        async (r) => r.text().then((t) => ({ ok: true, t }), () => ({ ok: false, t: '' })),
        () => ({ ok: false, t: '' }),
      )
      expect(out.t).not.toMatch(/delete_repo/)
      expect(out.ok).toBe(false)
    })

    it('an event whose data is not JSON cuts the stream', async () => {
      answer = (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.end(`data: {"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"delete_repo"}]}\n\n`)
      }
      const out = await h.open(url, { token, method: 'POST', body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), headers: { 'content-type': 'application/json' } }).then(
        async (r) => r.text().then((t) => ({ ok: true, t }), () => ({ ok: false, t: '' })),
        () => ({ ok: false, t: '' }),
      )
      expect(out.t).not.toMatch(/delete_repo/)
      expect(out.ok).toBe(false)
    })
  })
})

describe('MCP traffic outside the transport', () => {
  let h: Harness
  let token: string
  let url: string
  let seen = 0
  beforeAll(async () => {
    h = await startHarness()
    h.up.handler.current = (req, res) => {
      seen++
      req.resume()
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.end()
    }
    token = (await h.workspace(MCP_CAPS)).token
    url = `https://127.0.0.1:${h.up.httpsPort}/mcp`
  })
  afterAll(() => h?.close())

  it.each([
    ['a DELETE', 'DELETE'],
    ['a GET', 'GET'],
  ])('%s with a tools/call in its body is refused, not forwarded', async (_shape, method) => {
    const before = seen
    // Raw bytes: fetch will not send a body with a GET.
    const authority = `127.0.0.1:${h.up.httpsPort}`
    const res = await connectRequest({
      proxyPort: Number(new URL(h.proxyUrl).port), authority, token, caPem: h.proxy.ca.certPem, target: '/mcp', method,
      headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'delete_repo', arguments: { repo: 'x' } } }),
    })
    expect(res.status).toBe(400)
    expect(seen).toBe(before)
    expect(h.audit.decisions().at(-1)).toMatchObject({ decision: 'deny', reason: 'format_mismatch' })
  })

  it('caps lint refuses an MCP rule that admits a method outside the transport', () => {
    const res = compilePolicy(MCP_CAPS.replace('methods: [POST, GET, DELETE]', 'methods: [POST, GET, DELETE, PUT]'))
    expect(res.ok).toBe(false)
    expect(res.diagnostics.map((d) => d.code)).toContain('field_rejected')
  })

  it('a GET event stream without a body passes', async () => {
    const before = seen
    const res = await h.fetch(url, { token, method: 'GET', headers: { accept: 'text/event-stream' } })
    expect(res.status).toBe(200)
    expect(seen).toBe(before + 1)
  })
})
