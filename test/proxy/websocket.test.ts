// WebSocket through the proxy (docs/proxy.md "WebSocket"): real `ws` and undici clients, a real
// `ws` upstream, real TLS inside CONNECT and plain absolute-URI upgrades; the upgrade decided by
// the policy like any request, messages metered against budgets, injected credentials scrubbed
// from frames, and one row per socket with its closing fields, whichever side goes away.
import { ProxyAgent, WebSocket as UndiciWebSocket } from 'undici'
import { beforeAll, describe, expect, it } from 'vitest'
import { socketsCaps, wsSuite } from '../helpers/ws-suite.js'
import { closed, nextMessage, opened, wsPlain, wsTunnel } from './ws-helpers.js'

const SECRET = 'sk-ws-secret-7f3a91'

const CAPS = socketsCaps(['/echo', '/headers', '/usage', '/vanish', '/refuse'], {
  match: `      match:
        expr: '!("x-agent" in request.headers) || request.headers["x-agent"] != "blocked"'
`,
  rules: `    - name: plain
      domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/echo"]
      allow_insecure: true
`,
  budgets: `  budgets:
    counters:
      - name: sent
        source: websocket.messages
        direction: to_upstream
        workspace: { max: 100000 }
      - name: tokens
        source: websocket.message
        direction: to_agent
        value: 'event.type == "response.completed" ? event.data.response.usage.total_tokens : 0'
        workspace: { max: 100 }
`,
})

describe('WebSocket through the proxy', () => {
  const suite = wsSuite()
  const { newRows } = suite
  let ws: { workspaceId: string; token: string }

  beforeAll(async () => {
    ws = await suite.keyedWorkspace(CAPS, SECRET)
  })

  it('relays text, binary, fragmented messages and pings inside a CONNECT tunnel; one row at close with the counts', async () => {
    const c = await wsTunnel(suite.h, ws.token, '/echo')
    expect(await opened(c)).toEqual({ open: true })
    c.send('hello')
    expect((await nextMessage(c)).data.toString()).toBe('hello')
    c.send(Buffer.from([1, 2, 3]))
    const bin = await nextMessage(c)
    expect(bin.binary).toBe(true)
    expect([...bin.data]).toEqual([1, 2, 3])
    // One message in three frames: the upstream gets it whole.
    c.send('frag', { fin: false })
    c.send('men', { fin: false })
    c.send('ted', { fin: true })
    expect((await nextMessage(c)).data.toString()).toBe('fragmented')
    const pong = new Promise<Buffer>((r) => c.once('pong', r))
    c.ping('are-you-there')
    expect((await pong).toString()).toBe('are-you-there')
    expect(suite.h.audit.decisions().length).toBe(suite.before)
    c.close(1000)
    expect((await closed(c)).code).toBe(1000)
    const [row] = await newRows(1)
    expect(row).toMatchObject({ decision: 'allow', method: 'GET', path: '/echo', capability_name: 'realtime', debits: { sent: 3, tokens: 0 } })
    expect(row!.detail).toMatchObject({
      upstream_status: 101, response_complete: true,
      websocket: { closed_by: 'agent', close_code: 1000, upstream_close_code: 1000, to_upstream: { messages: 3, frames: 5, bytes: 18 }, to_agent: { messages: 3, frames: 3, bytes: 18 }, pings: 1 },
    })
    expect((row!.detail as { websocket: { duration_ms: number } }).websocket.duration_ms).toBeGreaterThanOrEqual(0)
  })

  it("undici's WebSocket through a ProxyAgent (CONNECT, corral CA) is relayed and recorded", async () => {
    const dispatcher = new ProxyAgent({ uri: suite.h.proxyUrl, token: `Bearer ${ws.token}`, requestTls: { ca: suite.h.proxy.ca.certPem } })
    const c = new UndiciWebSocket(`wss://127.0.0.1:${suite.h.up.httpsPort}/echo`, { dispatcher } as never)
    await new Promise((r, j) => {
      c.onopen = r
      c.onerror = j
    })
    const got = new Promise<string>((r) => (c.onmessage = (e) => r(String(e.data))))
    c.send('from undici')
    expect(await got).toBe('from undici')
    const done = new Promise<number>((r) => (c.onclose = (e) => r(e.code)))
    c.close(1000)
    expect(await done).toBe(1000)
    const [row] = await newRows(1)
    expect(row).toMatchObject({ decision: 'allow', path: '/echo' })
    expect(row!.detail).toMatchObject({ websocket: { close_code: 1000, to_upstream: { messages: 1 }, to_agent: { messages: 1 } } })
    await dispatcher.close()
  })

  it('a plain absolute-URI upgrade is a request too: allowed by an allow_insecure rule, refused 407 without a token', async () => {
    const c = wsPlain(suite.h, ws.token, '/echo')
    expect(await opened(c)).toEqual({ open: true })
    c.send('plain')
    expect((await nextMessage(c)).data.toString()).toBe('plain')
    c.close(1000)
    await closed(c)
    const [row] = await newRows(1)
    expect(row).toMatchObject({ decision: 'allow', path: '/echo', destination: '127.0.0.1' })
    const anon = wsPlain(suite.h, undefined, '/echo')
    const refused = await opened(anon)
    expect(refused).toMatchObject({ open: false, status: 407 })
  })

  it('denials: a path no rule names, a CEL condition over the headers, a host the policy does not name: status, reason and a row each', async () => {
    const nope = await opened(await wsTunnel(suite.h, ws.token, '/nope'))
    expect(nope).toMatchObject({ open: false, status: 403, reason: 'no_match' })
    const blocked = await opened(await wsTunnel(suite.h, ws.token, '/headers', { headers: { 'x-agent': 'blocked' } }))
    expect(blocked).toMatchObject({ open: false, status: 403, reason: 'no_match' })
    const rows = await newRows(2)
    expect(rows.map((r) => [r.decision, r.reason, r.path])).toEqual([['deny', 'no_match', '/nope'], ['deny', 'no_match', '/headers']])
    expect((rows[1]!.detail as { allowrule_eval: { failed: string }[] }).allowrule_eval.map((e) => e.failed)).toContain('match')
    expect(suite.up.last.url).not.toBe('/nope')
  })

  it('injects the credential into the upgrade and masks it in the frames that come back', async () => {
    const c = await wsTunnel(suite.h, ws.token, '/headers')
    const first = nextMessage(c)
    expect(await opened(c)).toEqual({ open: true })
    expect(suite.up.last.headers['x-api-key']).toBe(SECRET)
    const text = (await first).data.toString()
    expect(text).not.toContain(SECRET)
    expect(JSON.parse(text)['x-api-key']).toBe('********')
    c.send('again')
    expect((await nextMessage(c)).data.toString()).not.toContain(SECRET)
    c.close(1000)
    await closed(c)
    await newRows(1)
  })

  it('an upgrade the upstream refuses (403) is relayed with its body scrubbed, and the connection closed', async () => {
    const r = await opened(await wsTunnel(suite.h, ws.token, '/refuse'))
    expect(r).toMatchObject({ open: false, status: 403 })
    expect((r as { body: string }).body).toBe('refused: ********')
    const [row] = await newRows(1)
    expect(row).toMatchObject({ decision: 'allow', path: '/refuse' })
    expect(row!.detail).toMatchObject({ upstream_status: 403 })
  })

  it('a budget exhausted mid-connection closes the socket 4008 and settles the ledger with what was relayed', async () => {
    const own = await suite.h.workspace(CAPS)
    const c = await wsTunnel(suite.h, own.token, '/usage')
    expect(await opened(c)).toEqual({ open: true })
    const got: string[] = []
    c.on('message', (d) => got.push(d.toString()))
    const end = closed(c)
    for (let i = 0; i < 4; i++) c.send(`turn ${i}`)
    expect(await end).toEqual({ code: 4008, reason: 'budget_exhausted' })
    // 40 + 40 fit under 100; the third event (120) is not relayed.
    expect(got).toHaveLength(2)
    const [row] = await newRows(1)
    expect(row).toMatchObject({ decision: 'allow', debits: { tokens: 80 } })
    expect(row!.detail).toMatchObject({ websocket: { closed_by: 'proxy', close_code: 4008, close_reason: 'budget_exhausted', counter: 'tokens' }, response_complete: false })
    expect((row!.budget_state as Record<string, { workspace: { used: number } }>).tokens!.workspace.used).toBe(80)
    // The ledger keeps it: 20 are left, so the next socket opens, and its first event is refused.
    const next = await wsTunnel(suite.h, own.token, '/usage')
    expect(await opened(next)).toEqual({ open: true })
    const nextEnd = closed(next)
    let relayed = 0
    next.on('message', () => relayed++)
    next.send('turn 5')
    expect((await nextEnd).code).toBe(4008)
    expect(relayed).toBe(0)
    const [second] = await newRows(2).then((r) => r.slice(1))
    expect(second).toMatchObject({ debits: { tokens: 0 } })
    expect((second!.budget_state as Record<string, { workspace: { used: number } }>).tokens!.workspace.used).toBe(80)
  })

  it('the upstream vanishing mid-stream closes the agent 1014 and still writes the row', async () => {
    const c = await wsTunnel(suite.h, ws.token, '/vanish')
    expect(await opened(c)).toEqual({ open: true })
    const end = closed(c)
    c.send('bye')
    expect((await end).code).toBe(1014)
    const [row] = await newRows(1)
    expect(row!.detail).toMatchObject({ response_complete: false, websocket: { closed_by: 'upstream', close_code: 1014, upstream_close_code: 1006, to_upstream: { messages: 1 } } })
  })

  it('the agent vanishing (its socket destroyed) closes the upstream 1001 and still writes the row', async () => {
    const c = await wsTunnel(suite.h, ws.token, '/echo')
    expect(await opened(c)).toEqual({ open: true })
    c.send('one')
    await nextMessage(c)
    const closesBefore = suite.up.closes.length
    ;(c as unknown as { _socket: { destroy(): void } })._socket.destroy()
    const [row] = await newRows(1)
    expect(row!.detail).toMatchObject({ response_complete: false, websocket: { closed_by: 'agent', close_code: 1006, upstream_close_code: 1001, to_upstream: { messages: 1 }, to_agent: { messages: 1 } } })
    const end = Date.now() + 5_000
    while (suite.up.closes.length === closesBefore && Date.now() < end) await new Promise((r) => setTimeout(r, 10))
    expect(suite.up.closes.at(-1)).toBe(1001)
  })
})
