// Real clients of every transport, from inside one bubblewrap workspace, through the real proxy:
// the `ws` library (through HTTPS_PROXY with https-proxy-agent) and undici's WebSocket (its
// ProxyAgent), Node's own http2 client in a CONNECT tunnel, @grpc/grpc-js against a real gRPC
// service (it finds the proxy from `https_proxy` itself), and curl pinned to the upstream's key
// through SNI passthrough. Each runs by node or curl in the sandbox (the corral CA trusted through
// NODE_EXTRA_CA_CERTS; the repository's packages read from MODULES), and each call is one decision
// row naming the policy's capability and allow rule for it, with its transport's fields.
// curl --http2 and the MCP SDK client from a workspace are in h2-workspace.test.ts and
// mcp-sandbox.test.ts.
import { X509Certificate, createHash, randomUUID } from 'node:crypto'
import { mkdir, mkdtemp, readFile, realpath, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { connect as tlsConnect } from 'node:tls'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { WebSocketServer } from 'ws'
import type { AuditEvent } from '../../src/contract/index.js'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/ca.js'
import { packageRoot } from '../../src/runtime/layout.js'
import { localRuntime, type LocalRuntimeUnderTest } from '../runtime/drivers.js'
import { bwrapAvailable } from '../runtime/helpers.js'
import { startNotesServer } from './grpc-service.js'
import { startH2Upstream, type H2Upstream } from './h2-harness.js'
import { startHarness, type Harness } from './harness.js'
import { startPinnedUpstream } from './passthrough-harness.js'

const available = await bwrapAvailable()
if (!available && process.env.CORRAL_TEST_REQUIRE_BWRAP === '1') throw new Error('bubblewrap is required (CORRAL_TEST_REQUIRE_BWRAP=1) but does not work here')

/**
 * A `ws` server on HTTPS with a certificate for `localhost` (from the upstream CA the proxy
 * trusts): /echo sends each message back, /usage answers each with a Responses `response.completed`
 * event of 40 tokens. A host name, not an IP: https-proxy-agent checks an IP target's certificate
 * against "localhost".
 */
async function startWsUpstream(h: Harness): Promise<{ port: number; closes: number[]; close(): Promise<void> }> {
  const server: HttpsServer = createHttpsServer(await new LeafMinter(await loadOrCreateCa(join(h.dir, 'upstream-ca'))).pemFor('localhost'))
  const wss = new WebSocketServer({ server, perMessageDeflate: false })
  const closes: number[] = []
  wss.on('connection', (socket, req) => {
    socket.on('close', (code) => closes.push(code))
    socket.on('message', (data, isBinary) => {
      if (req.url === '/usage') socket.send(JSON.stringify({ type: 'response.completed', response: { usage: { total_tokens: 40 } } }))
      else socket.send(data, { binary: isBinary })
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    port: (server.address() as AddressInfo).port, closes,
    close: () => new Promise<void>((r) => { wss.close(); server.closeAllConnections(); server.close(() => r()) }),
  }
}

const loopback = (host: string, port: number): string => `domains: ["${host}:${port}"]\n      allow_private: ["127.0.0.0/8", "::1"]`

function caps(ports: { ws: number; h2: number; grpc: number; pinned: number }): string {
  return `
- name: sockets
  type: http
  allow:
    - name: upgrades
      ${loopback('localhost', ports.ws)}
      methods: [GET]
      paths: ["/echo", "/usage"]
      match:
        expr: '"sec-websocket-key" in request.headers'
  budgets:
    counters:
      - {name: ws_messages, source: websocket.messages, workspace: {max: 1000}}
      - name: ws_tokens
        source: websocket.message
        direction: to_agent
        value: 'event.type == "response.completed" ? event.data.response.usage.total_tokens : 0'
        workspace: {max: 100000}
- name: h2-api
  type: http
  allow:
    - name: node-http2
      ${loopback('127.0.0.1', ports.h2)}
      methods: [GET]
      paths: ["/from-node-http2"]
- name: notes
  type: http
  allow:
    - name: read
      ${loopback('127.0.0.1', ports.grpc)}
      methods: [POST]
      paths: ["/corraltest.Notes/Get"]
      match:
        expr: 'request.headers["content-type"].startsWith("application/grpc")'
- name: pinned
  type: http
  allow:
    - name: pinned-client
      ${loopback('localhost', ports.pinned)}
      passthrough: true
`
}

// Runs inside the sandbox: each client in turn, its outcome (or its error) into /data/clients.json.
const CLIENTS = String.raw`
const { createRequire } = await import('node:module')
const require = createRequire(process.env.MODULES + '/')
const fs = require('node:fs'), http = require('node:http'), http2 = require('node:http2'), tls = require('node:tls'), { execFileSync } = require('node:child_process')
const { WebSocket } = require('ws')
const { HttpsProxyAgent } = require('https-proxy-agent')
const undici = require('undici')
const grpc = require('@grpc/grpc-js'), loader = require('@grpc/proto-loader')
const E = process.env
const out = {}
const attempt = async (key, f) => {
  try { out[key] = { ok: await Promise.race([f(), new Promise((_, no) => setTimeout(() => no(new Error('timed out')), 20000))]) } }
  catch (e) { out[key] = { error: String(e && e.message || e), code: e && e.code } }
}

await attempt('ws', () => new Promise((resolve, reject) => {
  const s = new WebSocket('wss://localhost:' + E.WS_PORT + '/usage', { agent: new HttpsProxyAgent(E.HTTPS_PROXY) })
  let got
  s.on('open', () => s.send('usage please'))
  s.on('message', (d) => { got = JSON.parse(String(d)); s.close(1000) })
  s.on('close', (code) => resolve({ got, code }))
  s.on('error', reject)
}))

await attempt('undici', () => new Promise((resolve, reject) => {
  const s = new undici.WebSocket('wss://localhost:' + E.WS_PORT + '/echo', { dispatcher: new undici.ProxyAgent({ uri: E.HTTPS_PROXY, proxyTunnel: true }) })
  let got
  s.onopen = () => s.send('hello from undici')
  s.onmessage = (ev) => { got = String(ev.data); s.close(1000) }
  s.onclose = (ev) => resolve({ got, code: ev.code })
  s.onerror = (ev) => reject(new Error('undici WebSocket: ' + (ev.message || (ev.error && ev.error.message) || 'error')))
}))

await attempt('http2', () => new Promise((resolve, reject) => {
  const p = new URL(E.HTTPS_PROXY)
  const auth = 'Basic ' + Buffer.from(decodeURIComponent(p.username) + ':' + decodeURIComponent(p.password)).toString('base64')
  const target = '127.0.0.1:' + E.H2_PORT
  const c = http.request({ host: p.hostname, port: p.port, method: 'CONNECT', path: target, headers: { host: target, 'proxy-authorization': auth } })
  c.on('connect', (res, socket) => {
    if (res.statusCode !== 200) return reject(new Error('CONNECT answered ' + res.statusCode))
    const session = http2.connect('https://' + target, { createConnection: () => tls.connect({ socket, host: '127.0.0.1', ALPNProtocols: ['h2'] }) })
    session.on('error', reject)
    const s = session.request({ ':path': '/from-node-http2' })
    let body = '', status = 0
    s.on('response', (h) => (status = h[':status']))
    s.on('data', (d) => (body += d))
    s.on('end', () => { const alpn = session.alpnProtocol; session.close(); resolve({ status, body, alpn }) })
    s.on('error', reject)
  })
  c.on('error', reject)
  c.end()
}))

await attempt('grpc', () => new Promise((resolve, reject) => {
  const pkg = grpc.loadPackageDefinition(loader.loadSync(E.PROTO, { keepCase: true }))
  const client = new pkg.corraltest.Notes('127.0.0.1:' + E.GRPC_PORT, grpc.credentials.createSsl(fs.readFileSync(E.CORRAL_CA_FILE)))
  client.Get({ id: 'n1' }, (err, note) => {
    if (err) { client.close(); return reject(err) }
    client.Delete({ id: 'n1' }, (denied) => { client.close(); resolve({ note, denied: denied ? { code: denied.code, details: denied.details } : null }) })
  })
}))

await attempt('pinned', async () => execFileSync('curl', ['-sS', '--max-time', '15', '--cacert', '/data/pinned-ca.pem', '--pinnedpubkey', 'sha256//' + E.PINNED_KEY, 'https://localhost:' + E.PINNED_PORT + '/pinned'], { encoding: 'utf8' }))

fs.writeFileSync('/data/clients.json', JSON.stringify(out))
process.exit(0)
`

describe.skipIf(!available)('real clients of every transport from a bubblewrap workspace', { timeout: 120_000 }, () => {
  let h: Harness
  let ws: Awaited<ReturnType<typeof startWsUpstream>>
  let h2: H2Upstream
  let notes: Awaited<ReturnType<typeof startNotesServer>>
  let pinned: Awaited<ReturnType<typeof startPinnedUpstream>>
  let root: string
  let runtime: LocalRuntimeUnderTest
  let out: Record<string, { ok?: any; error?: string }>
  let rows: AuditEvent[]

  beforeAll(async () => {
    h = await startHarness()
    ws = await startWsUpstream(h)
    h2 = await startH2Upstream(h)
    h2.handler.current = (req, res) => res.end(`h2 upstream saw ${req.httpVersion}`)
    notes = await startNotesServer(h)
    pinned = await startPinnedUpstream(h)
    // The key the pinned client accepts: the upstream's own leaf, read as any pin is made.
    const spki = await new Promise<Buffer>((resolve, reject) => {
      const t = tlsConnect({ host: '127.0.0.1', port: pinned.port, servername: 'localhost', ca: pinned.caPem }, () => {
        resolve(new X509Certificate(t.getPeerCertificate().raw).publicKey.export({ type: 'spki', format: 'der' }))
        t.end()
      })
      t.once('error', reject)
    })
    await mkdir(join(packageRoot(), '.corral'), { recursive: true })
    root = await mkdtemp(join(packageRoot(), '.corral', 'test-clients-'))
    await writeFile(join(root, 'corral-ca.pem'), h.proxy.ca.certPem)
    runtime = localRuntime({ root, proxy: { host: '127.0.0.1', port: Number(new URL(h.proxyUrl).port) }, caCertPath: join(root, 'corral-ca.pem'), stopGraceMs: 1000, warn: () => {} })

    const { workspaceId, token } = await h.workspace(caps({ ws: ws.port, h2: h2.port, grpc: notes.port, pinned: pinned.port }), 'idle', { raw: true })
    const sandbox = await runtime.provision({ workspaceId: `ws_clients_${randomUUID().slice(0, 8)}` })
    await writeFile(join(sandbox.dataDir, 'pinned-ca.pem'), pinned.caPem)
    const agent = await runtime.startAgent(sandbox.workspaceId, {
      command: [process.execPath, '--input-type=module', '-e', CLIENTS],
      proxyToken: token,
      env: {
        MODULES: await realpath(join(packageRoot(), 'node_modules')),
        PROTO: join(packageRoot(), 'test/fixtures/grpc/notes.proto'),
        WS_PORT: String(ws.port), H2_PORT: String(h2.port), GRPC_PORT: String(notes.port), PINNED_PORT: String(pinned.port),
        PINNED_KEY: createHash('sha256').update(spki).digest('base64'),
      },
    })
    await agent.exited
    out = JSON.parse(await readFile(join(sandbox.dataDir, 'clients.json'), 'utf8'))
    // Six rows: two sockets, the h2 request, two gRPC calls, the passthrough tunnel. A socket's and
    // a tunnel's row is written when it closes.
    const mine = (): AuditEvent[] => h.audit.decisions().filter((r) => r.workspace_id === workspaceId)
    const end = Date.now() + 10_000
    while (mine().length < 6 && Date.now() < end) await new Promise((r) => setTimeout(r, 20))
    rows = mine()
  })
  afterAll(async () => {
    await runtime?.close()
    await pinned?.close()
    await notes?.close()
    await h2?.close()
    await ws?.close()
    await h?.close()
    if (root) await rm(root, { recursive: true, force: true })
  })

  const rowsOf = (capability: string): AuditEvent[] => rows.filter((r) => r.capability_name === capability)

  it('the `ws` library and undici\'s WebSocket: each upgrade allowed by the socket rule, its messages relayed and metered, one row per socket', () => {
    expect(out.ws, JSON.stringify(out)).toEqual({ ok: { got: { type: 'response.completed', response: { usage: { total_tokens: 40 } } }, code: 1000 } })
    expect(out.undici, JSON.stringify(out)).toEqual({ ok: { got: 'hello from undici', code: 1000 } })
    const sockets = rowsOf('sockets').sort((a, b) => String(a.path).localeCompare(String(b.path)))
    expect(sockets.map((r) => [r.decision, r.policy_type, r.detail?.rule, r.method, r.path])).toEqual([['allow', 'http', 'upgrades', 'GET', '/echo'], ['allow', 'http', 'upgrades', 'GET', '/usage']])
    for (const r of sockets) {
      expect(r.detail, JSON.stringify(r)).toMatchObject({ upstream_status: 101, response_complete: true, websocket: { closed_by: 'agent', close_code: 1000, to_upstream: { messages: 1 }, to_agent: { messages: 1 } } })
    }
    expect(sockets.map((r) => r.debits)).toEqual([{ ws_messages: 2, ws_tokens: 0 }, { ws_messages: 2, ws_tokens: 40 }])
    expect(ws.closes).toEqual([1000, 1000])
  })

  it("Node's http2 client: h2 end to end, one row saying so", () => {
    expect(out.http2, JSON.stringify(out)).toEqual({ ok: { status: 200, body: 'h2 upstream saw 2.0', alpn: 'h2' } })
    expect(rowsOf('h2-api').map((r) => [r.decision, r.policy_type, r.detail?.rule, r.method, r.path])).toEqual([['allow', 'http', 'node-http2', 'GET', '/from-node-http2']])
    expect(rowsOf('h2-api')[0]!.detail).toMatchObject({ protocol: 'h2', upstream_status: 200, response_complete: true })
  })

  it('@grpc/grpc-js: the allowed method answered with a gRPC status-0 row; the other refused PERMISSION_DENIED with a deny row, never reaching the service', () => {
    expect(out.grpc, JSON.stringify(out)).toMatchObject({ ok: { note: { id: 'n1', text: 'note n1' }, denied: { code: 7 } } })
    expect(out.grpc!.ok.denied.details).toMatch(/no_match/)
    const calls = rows.filter((r) => String(r.path).startsWith('/corraltest.Notes/'))
    expect(calls.map((r) => [r.decision, r.policy_type, r.capability_name, r.method, r.path, r.reason])).toEqual([
      ['allow', 'http', 'notes', 'POST', '/corraltest.Notes/Get', undefined],
      ['deny', 'http', '', 'POST', '/corraltest.Notes/Delete', 'no_match'],
    ])
    expect(calls[0]!.detail).toMatchObject({ rule: 'read', protocol: 'h2', grpc_status: 0, upstream_status: 200 })
    expect(calls[1]!.detail).toMatchObject({ protocol: 'h2' })
    expect((calls[1]!.detail as { allowrule_eval: unknown[] }).allowrule_eval).toContainEqual({ capability: 'notes', rule: 'read', failed: 'path' })
    expect(notes.calls).toEqual(['Get n1'])
  })

  it('curl pinned to the upstream\'s own key: its TLS spliced through unread (SNI passthrough), one tunnel row', () => {
    // curl trusts only the upstream's CA and pins its key: a certificate the corral CA minted fails it.
    expect(out.pinned, JSON.stringify(out)).toEqual({ ok: 'pinned upstream: /pinned' })
    const tunnel = rowsOf('pinned')
    expect(tunnel.map((r) => [r.decision, r.policy_type, r.method, r.destination])).toEqual([['allow', 'http', 'CONNECT', 'localhost']])
    expect(tunnel[0]!.detail).toMatchObject({ rule: 'pinned-client', passthrough: true, sni: 'localhost', response_complete: true })
    expect(rows).toHaveLength(6)
  })
})
