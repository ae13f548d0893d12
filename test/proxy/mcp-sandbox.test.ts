// An MCP client inside a bubblewrap workspace: the official SDK client, run by node in the sandbox
// (its only way out is the proxy bridge, the corral CA trusted through NODE_EXTRA_CA_CERTS), talks
// to @modelcontextprotocol/server-everything over streamable HTTP through the real proxy. The
// policy allows two of the server's tools, one of them only for small arguments.
import { spawn, type ChildProcess } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { mkdir, mkdtemp, readFile, realpath, rm, writeFile } from 'node:fs/promises'
import { request } from 'node:http'
import { createServer, type AddressInfo } from 'node:net'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { packageRoot } from '../../src/runtime/layout.js'
import { localRuntime, type LocalRuntimeUnderTest } from '../runtime/drivers.js'
import { bwrapAvailable } from '../runtime/helpers.js'
import { startHarness, type Harness } from './harness.js'
import { mcpRows } from './mcp-upstream.js'

const available = await bwrapAvailable()

const CAPS = `- name: everything
  type: http
  allow:
    - name: everything-mcp
      domains: ["127.0.0.1"]
      methods: [POST, GET, DELETE]
      paths: [/mcp]
      mcp:
        server: everything
        tools:
          - name: echo
            input_schema: {type: object, properties: {message: {type: string}}, required: [message]}
          - name: get-sum
            input_schema: {type: object, properties: {a: {type: number}, b: {type: number}}, required: [a, b]}
            when: 'args.a + args.b < 100.0'
`

// Runs inside the sandbox: the SDK client through HTTPS_PROXY (the capability token is its userinfo).
const CLIENT = String.raw`
const m = process.env.MODULES
const { Client } = await import(m + '/@modelcontextprotocol/sdk/dist/esm/client/index.js')
const { StreamableHTTPClientTransport } = await import(m + '/@modelcontextprotocol/sdk/dist/esm/client/streamableHttp.js')
const { ProxyAgent, fetch } = await import(m + '/undici/index.js').then((x) => x.default ?? x)
const fs = await import('node:fs')
const agent = new ProxyAgent({ uri: process.env.HTTPS_PROXY, proxyTunnel: true })
const transport = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), { fetch: (u, init) => fetch(u, { ...init, dispatcher: agent }) })
const client = new Client({ name: 'sandboxed', version: '1.0.0' })
const out = {}
const attempt = async (key, f) => { try { out[key] = { ok: await f() } } catch (e) { out[key] = { error: e.code ?? null, message: String(e.message) } } }
await attempt('connect', async () => { await client.connect(transport); return true })
await attempt('tools', async () => (await client.listTools()).tools.map((t) => t.name).sort())
await attempt('echo', async () => (await client.callTool({ name: 'echo', arguments: { message: 'from the sandbox' } })).content)
await attempt('smallSum', async () => (await client.callTool({ name: 'get-sum', arguments: { a: 2, b: 3 } })).content)
await attempt('bigSum', async () => (await client.callTool({ name: 'get-sum', arguments: { a: 200, b: 3 } })).content)
await attempt('env', async () => (await client.callTool({ name: 'get-env', arguments: {} })).content)
await client.close().catch(() => {})
fs.writeFileSync('/data/mcp.json', JSON.stringify(out))
process.exit(0)
`

async function freePort(): Promise<number> {
  const s = createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r))
  const port = (s.address() as AddressInfo).port
  await new Promise((r) => s.close(r))
  return port
}

describe.skipIf(!available)('an MCP client in a bubblewrap workspace', () => {
  let h: Harness
  let everything: ChildProcess
  let everythingPort: number
  let root: string
  let runtime: LocalRuntimeUnderTest

  beforeAll(async () => {
    h = await startHarness()
    everythingPort = await freePort()
    const entry = join(packageRoot(), 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')
    everything = spawn(process.execPath, [entry, 'streamableHttp'], { env: { ...process.env, PORT: String(everythingPort) }, stdio: ['ignore', 'ignore', 'pipe'] })
    await new Promise<void>((resolve, reject) => {
      let err = ''
      everything.stderr!.on('data', (d: Buffer) => {
        err += d.toString()
        if (/listening on port/i.test(err)) resolve()
      })
      everything.once('exit', (code) => reject(new Error(`server-everything exited ${code}: ${err}`)))
    })
    // The harness's HTTPS upstream fronts it: the proxy reaches a TLS origin, as it would a remote server.
    h.up.handler.current = (req, res) => {
      const up = request({ host: '127.0.0.1', port: everythingPort, method: req.method, path: req.url, headers: req.headers }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers)
        r.pipe(res)
      })
      up.on('error', () => res.destroy())
      req.pipe(up)
    }
    await mkdir(join(packageRoot(), '.corral'), { recursive: true })
    root = await mkdtemp(join(packageRoot(), '.corral', 'test-mcp-'))
    await writeFile(join(root, 'corral-ca.pem'), h.proxy.ca.certPem)
    const port = Number(new URL(h.proxyUrl).port)
    runtime = localRuntime({ root, proxy: { host: '127.0.0.1', port }, caCertPath: join(root, 'corral-ca.pem'), stopGraceMs: 1000, warn: () => {} })
  })
  afterAll(async () => {
    await runtime?.close()
    everything?.kill()
    await h?.close()
    if (root) await rm(root, { recursive: true, force: true })
  })

  it('lists and calls only what the policy allows; a refused call is a JSON-RPC error in the client; one row per call', async () => {
    const { workspaceId, token } = await h.workspace(CAPS)
    const ws = await runtime.provision({ workspaceId: `ws_mcp_${randomUUID().slice(0, 8)}` })
    const agent = await runtime.startAgent(ws.workspaceId, {
      command: [process.execPath, '--input-type=module', '-e', CLIENT],
      proxyToken: token,
      env: { MODULES: await realpath(join(packageRoot(), 'node_modules')), MCP_URL: `https://127.0.0.1:${h.up.httpsPort}/mcp` },
    })
    await agent.exited
    const out = JSON.parse(await readFile(join(ws.dataDir, 'mcp.json'), 'utf8')) as Record<string, { ok?: unknown; error?: number; message?: string }>
    expect(out.connect).toEqual({ ok: true })
    expect(out.tools).toEqual({ ok: ['echo', 'get-sum'] })
    expect(out.echo!.ok).toEqual([{ type: 'text', text: 'Echo: from the sandbox' }])
    expect(JSON.stringify(out.smallSum!.ok)).toMatch(/5/)
    expect(out.bigSum).toMatchObject({ error: -32001, message: expect.stringMatching(/do not satisfy its condition/) })
    expect(out.env).toMatchObject({ error: -32001, message: expect.stringMatching(/tool "get-env" is not allowed/) })
    const rows = mcpRows(h.audit.decisions(), 'tools/call').filter((r) => r.workspace_id === workspaceId)
    expect(rows.map((r) => [r.detail?.mcp_tool, r.decision]).sort()).toEqual([['echo', 'allow'], ['get-env', 'deny'], ['get-sum', 'allow'], ['get-sum', 'deny']])
  })
})
