// Every request through a real policy: allow rows, deny reasons from the policy phases, and
// transforms, each checked on the one policy_decision row it leaves.
import { request as httpRequest } from 'node:http'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { AuditEvent } from '../../src/contract/index.js'
import { startHarness, type Harness } from './harness.js'

const CAPS = `
- name: llm
  type: http
  allow:
    - name: messages
      domains: ["127.0.0.1"]
      methods: [POST]
      paths: ["/v1/messages"]
      request_format: application/json
      request_schema:
        type: object
        required: [model]
        properties:
          model: { type: string }
    - name: models
      domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/v1/models", "/v1/models/*"]
    - name: flagged
      domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/flag/*"]
      match:
        expr: dyn(request.headers["x-flag"])
    - name: erroring
      domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/err/*"]
      match:
        expr: request.headers["x-missing"] == "1"
    - name: nullish
      domains: ["127.0.0.1"]
      methods: [POST]
      paths: ["/null"]
      request_format: application/json
      match:
        requires_body: true
        expr: request.body.flag
    - name: nobody
      domains: ["127.0.0.1"]
      methods: [POST]
      paths: ["/v1/empty"]
      request_format: application/json
    - name: plainpost
      domains: ["localhost"]
      methods: [POST]
      allow_insecure: true
      request_format: application/json
    - name: plain
      domains: ["localhost"]
      methods: [GET]
      allow_insecure: true
  transforms:
    - name: version
      applies_to: [models, messages]
      header: { name: anthropic-version, action: set, value: '"2023-06-01"' }
    - name: ws-header
      applies_to: [models]
      header: { name: x-workspace, action: set, value: workspace.id }
    - name: bad-type
      applies_to: [models]
      header: { name: x-bad, action: set, value: "dyn(1)" }
    - name: bad-eval
      applies_to: [models]
      header: { name: x-eval, action: set, value: 'request.headers["nope"]' }
    - name: prefix
      applies_to: [models]
      path: { action: prefix, value: '"/api"' }
    - name: q
      applies_to: [models]
      query: { action: set, key: source, value: '"corral"' }
    - name: qrm
      applies_to: [models]
      query: { action: remove, key: drop }
    - name: merge
      applies_to: [messages]
      body: { action: merge, value: '{"metadata": {"user_id": workspace.id}}' }
    - name: sysprefix
      applies_to: [messages]
      body: { action: prefix, key: system, value: '"[corral] "' }
    - name: empty-body
      applies_to: [nobody]
      body: { action: merge, value: '{"x": 1}' }
    - name: token
      applies_to: [models]
      auth: { credential: gh, provider: github }
`

interface Echo { method: string; url: string; headers: Record<string, string>; body: string }

describe('policy decisions through the proxy (real policy, real sockets)', () => {
  let h: Harness
  let ws: { workspaceId: string; token: string }
  const base = (): string => `https://127.0.0.1:${h.up.httpsPort}`
  let before = 0
  const newRows = async (n: number): Promise<AuditEvent[]> => (await h.audit.waitForDecisions(before + n)).slice(before)

  beforeAll(async () => {
    h = await startHarness()
    h.up.handler.current = (req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        res.setHeader('content-type', 'application/json')
        res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks).toString() }))
      })
    }
    ws = await h.workspace(CAPS)
  })
  afterAll(async () => {
    await h.close()
  })
  beforeEach(() => {
    before = h.audit.decisions().length
  })

  it('allows a GET, applies header/path/query transforms, records failures, never forwards the token', async () => {
    const res = await h.fetch(`${base()}/v1/models?drop=1&keep=2`, { token: ws.token })
    expect(res.status).toBe(200)
    const echo = JSON.parse(res.body) as Echo
    expect(echo.url).toBe('/api/v1/models?keep=2&source=corral')
    expect(echo.headers['anthropic-version']).toBe('2023-06-01')
    expect(echo.headers['x-workspace']).toBe(ws.workspaceId)
    expect(echo.headers['x-bad']).toBeUndefined()
    expect(echo.headers['proxy-authorization']).toBeUndefined()
    expect(echo.headers.authorization).toBeUndefined()
    const [row] = await newRows(1)
    expect(row).toMatchObject({
      decision: 'allow', capability_name: 'llm', phase: 'response_body', destination: '127.0.0.1', method: 'GET', path: '/v1/models',
      user_id: h.userId, workspace_id: ws.workspaceId, transforms_applied: 5, validations_applied: 0,
      transforms_failed: { 'bad-type': 'type_mismatch', 'bad-eval': 'eval_error', token: 'auth_unavailable' },
      auth_used: [], auth_failures: { gh: 'auth_unavailable' }, debits: {}, budget_state: {}, floored: {},
      detail: { rule: 'models', upstream_status: 200, response_complete: true },
    })
    expect(row!.reason).toBeUndefined()
    expect(typeof row!.latency_ms).toBe('number')
    expect(JSON.stringify(row)).not.toContain(ws.token)
  })

  it('body transforms merge and prefix, the schema counts as one validation', async () => {
    const res = await h.fetch(`${base()}/v1/messages`, { token: ws.token, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', system: 'be brief' }) })
    expect(res.status).toBe(200)
    const echo = JSON.parse(res.body) as Echo
    expect(JSON.parse(echo.body)).toEqual({ model: 'm', system: '[corral] be brief', metadata: { user_id: ws.workspaceId } })
    const [row] = await newRows(1)
    expect(row).toMatchObject({ decision: 'allow', capability_name: 'llm', validations_applied: 1, transforms_applied: 3, transforms_failed: {} })
  })

  it('a client that leaves mid-stream cuts the upstream request; the row records it once', async () => {
    let upstreamClosed!: () => void
    const closed = new Promise<void>((r) => (upstreamClosed = r))
    const echo = h.up.handler.current
    h.up.handler.current = (req, res) => {
      if (!req.url!.includes('/hold')) return echo(req, res)
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write('data: first\n\n')
      res.on('close', () => upstreamClosed())
    }
    try {
      const ac = new AbortController()
      const res = await h.open(`${base()}/v1/models/hold`, { token: ws.token, signal: ac.signal } as never)
      const reader = res.body!.getReader()
      await reader.read()
      ac.abort()
      await closed
      const [row] = await newRows(1)
      expect(row).toMatchObject({ decision: 'allow', path: '/v1/models/hold', detail: { client_closed: true } })
      await new Promise((r) => setTimeout(r, 50))
      expect(h.audit.decisions().length).toBe(before + 1)
    } finally {
      h.up.handler.current = echo
    }
  })

  it('body_absent: a body transform on a request without a body', async () => {
    const res = await h.fetch(`${base()}/v1/empty`, { token: ws.token, method: 'POST' })
    expect(res.status).toBe(200)
    const [row] = await newRows(1)
    expect(row).toMatchObject({ decision: 'allow', transforms_failed: { 'empty-body': 'body_absent' } })
  })

  it('no_match names every rule in detail.allowrule_eval', async () => {
    const res = await h.fetch(`${base()}/admin`, { token: ws.token })
    expect(res.status).toBe(403)
    expect(JSON.parse(res.body).error.reason).toBe('no_match')
    const [row] = await newRows(1)
    expect(row).toMatchObject({ decision: 'deny', reason: 'no_match', phase: 'request_headers' })
    const evals = row!.detail!.allowrule_eval as { rule: string; failed: string }[]
    expect(evals.find((e) => e.rule === 'models')).toMatchObject({ failed: 'path' })
  })

  it('no_scheme: plain HTTP to an https-only rule', async () => {
    const res = await h.fetch(`http://127.0.0.1:${h.up.httpPort}/v1/models`, { token: ws.token })
    expect(res.status).toBe(403)
    expect(JSON.parse(res.body).error.reason).toBe('no_scheme')
    const [row] = await newRows(1)
    expect(row).toMatchObject({ reason: 'no_scheme', phase: 'request_headers' })
  })

  it('allow_insecure admits plain HTTP (absolute URI), keep-alive, no credentials involved', async () => {
    const res = await h.fetch(`http://localhost:${h.up.httpPort}/anything?x=1`, { token: ws.token })
    expect(res.status).toBe(200)
    expect((JSON.parse(res.body) as Echo).url).toBe('/anything?x=1')
    const [row] = await newRows(1)
    expect(row).toMatchObject({ decision: 'allow', destination: 'localhost', path: '/anything' })
  })

  it('format_mismatch, invalid_json, schema_violation at request_body with allowrule_eval', async () => {
    const post = (body: string, type: string) => h.fetch(`${base()}/v1/messages`, { token: ws.token, method: 'POST', headers: { 'content-type': type }, body })
    expect(JSON.parse((await post('{"model":"m"}', 'text/plain')).body).error.reason).toBe('format_mismatch')
    expect(JSON.parse((await post('{"model":', 'application/json')).body).error.reason).toBe('invalid_json')
    expect(JSON.parse((await post('{"max_tokens":1}', 'application/json')).body).error.reason).toBe('schema_violation')
    const rows = await newRows(3)
    expect(rows.map((r) => [r.reason, r.phase])).toEqual([
      ['format_mismatch', 'request_body'], ['invalid_json', 'request_body'], ['schema_violation', 'request_body'],
    ])
    for (const r of [rows[0]!, rows[2]!]) expect(Array.isArray(r.detail!.allowrule_eval)).toBe(true)
    expect(rows[2]!.validations_applied).toBe(1)
  })

  it('policy_type_error, policy_error, policy_empty come from the match expressions at runtime', async () => {
    const a = await h.fetch(`${base()}/flag/x`, { token: ws.token, headers: { 'x-flag': 'yes' } })
    const b = await h.fetch(`${base()}/err/x`, { token: ws.token })
    const c = await h.fetch(`${base()}/null`, { token: ws.token, method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"flag": null}' })
    expect([a, b, c].map((r) => JSON.parse(r.body).error.reason)).toEqual(['policy_type_error', 'policy_error', 'policy_empty'])
    const rows = await newRows(3)
    expect(rows.map((r) => r.reason)).toEqual(['policy_type_error', 'policy_error', 'policy_empty'])
  })

  it('policy_empty: a document without capabilities produces no result', async () => {
    const empty = await h.workspace('[]\n')
    const res = await h.fetch(`${base()}/v1/models`, { token: empty.token })
    expect(JSON.parse(res.body).error.reason).toBe('policy_empty')
    const [row] = await newRows(1)
    expect(row).toMatchObject({ decision: 'deny', reason: 'policy_empty', phase: 'request_headers', workspace_id: empty.workspaceId })
  })

  it('a body over the inspection limit is refused with 413 without buffering it all', async () => {
    const big = JSON.stringify({ model: 'm', pad: 'x'.repeat(9 * 1024 * 1024) })
    const res = await h.fetch(`${base()}/v1/messages`, { token: ws.token, method: 'POST', headers: { 'content-type': 'application/json' }, body: big })
    expect(res.status).toBe(413)
    const [row] = await newRows(1)
    expect(row).toMatchObject({ reason: 'schema_violation', detail: { body_too_large: true } })
  })

  it('workspace_gone: the workspace is deactivated while the body is arriving', async () => {
    const other = await h.workspace(CAPS)
    await h.fetch(`${base()}/v1/models`, { token: other.token })
    before = h.audit.decisions().length
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port: Number(new URL(h.proxyUrl).port), method: 'POST', path: `http://localhost:${h.up.httpPort}/v1/messages`,
        headers: { 'proxy-authorization': `Bearer ${other.token}`, 'content-type': 'application/json', 'transfer-encoding': 'chunked' } }, (res) => { res.resume(); resolve(res.statusCode!) })
      req.on('error', reject)
      req.write('{"model":')
      setTimeout(() => void h.proxy.workspaces.deactivate(other.workspaceId).then(() => req.end('"m"}')), 100)
    })
    expect(status).toBe(403)
    const [row] = await newRows(1)
    expect(row).toMatchObject({ decision: 'deny', reason: 'workspace_gone', phase: 'request_body', workspace_id: other.workspaceId })
  })
})
