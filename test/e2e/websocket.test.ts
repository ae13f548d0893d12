// A WebSocket from inside a workspace (bubblewrap where it runs): the reference agent, driven by
// the fake model, runs a client inside the sandbox that reaches a real `ws` upstream through the
// workspace's HTTPS_PROXY (CONNECT, the corral CA it is given), exchanges a message and closes;
// the upstream saw the message and the audit API holds the socket's one row with its counts.
// The client uses Node's built-ins only (the sandbox has `node`, not the repository's packages).
import { createServer, type Server } from 'node:https'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { WebSocketServer } from 'ws'
import { modelPolicy } from '../../src/dev/index.js'
import { startStack, type Stack } from '../helpers/serve.js'
import { bwrapAvailable } from '../runtime/helpers.js'

const RUNTIME = (await bwrapAvailable()) ? 'local' : 'process'
const HOST = '127.0.0.2'

function client(target: string): string {
  return `
const net = require('net'), tls = require('tls'), crypto = require('crypto'), fs = require('fs')
const p = new URL(process.env.HTTPS_PROXY)
const auth = 'Basic ' + Buffer.from(decodeURIComponent(p.username) + ':' + decodeURIComponent(p.password)).toString('base64')
const frame = (op, payload) => {
  const mask = crypto.randomBytes(4)
  return Buffer.concat([Buffer.from([0x80 | op, 0x80 | payload.length]), mask, Buffer.from(payload.map((b, i) => b ^ mask[i % 4]))])
}
const s = net.connect(Number(p.port), p.hostname, () => s.write('CONNECT ${target} HTTP/1.1\\r\\nhost: ${target}\\r\\nproxy-authorization: ' + auth + '\\r\\n\\r\\n'))
s.once('data', (d) => {
  if (!/^HTTP\\/1.1 200/.test(d.toString())) { console.log('connect: ' + d.toString()); process.exit(1) }
  const t = tls.connect({ socket: s, host: '${HOST}', ca: fs.readFileSync(process.env.CORRAL_CA_FILE) }, () => {
    t.write('GET /echo HTTP/1.1\\r\\nhost: ${target}\\r\\nupgrade: websocket\\r\\nconnection: Upgrade\\r\\nsec-websocket-key: ' + crypto.randomBytes(16).toString('base64') + '\\r\\nsec-websocket-version: 13\\r\\n\\r\\n')
    let buf = Buffer.alloc(0), upgraded = false
    t.on('data', (c) => {
      buf = Buffer.concat([buf, c])
      if (!upgraded) {
        const i = buf.indexOf('\\r\\n\\r\\n')
        if (i < 0) return
        const head = buf.subarray(0, i).toString()
        if (!head.startsWith('HTTP/1.1 101')) { console.log('upgrade: ' + head); process.exit(1) }
        upgraded = true
        buf = buf.subarray(i + 4)
        t.write(frame(1, Buffer.from('hello from the sandbox')))
      }
      while (buf.length >= 2 && buf.length >= 2 + (buf[1] & 127)) {
        const op = buf[0] & 15, len = buf[1] & 127, payload = buf.subarray(2, 2 + len)
        buf = buf.subarray(2 + len)
        if (op === 1) { console.log('echo: ' + payload.toString()); t.write(frame(8, Buffer.from([3, 232]))) }
        else if (op === 8) { console.log('closed: ' + payload.readUInt16BE(0)); t.end(); process.exit(0) }
      }
    })
  })
})
`
}

describe(`a WebSocket from inside a workspace (${RUNTIME} runtime)`, () => {
  let stack: Stack
  let upstream: Server
  const seen: string[] = []

  beforeAll(async () => {
    // The upstream listens first (its port goes into the policy); its certificate comes from the
    // stack's upstream CA once the stack is up.
    upstream = createServer({})
    const wss = new WebSocketServer({ server: upstream, perMessageDeflate: false })
    wss.on('connection', (ws) => ws.on('message', (d, binary) => {
      seen.push(d.toString())
      ws.send(d, { binary })
    }))
    await new Promise<void>((r) => upstream.listen(0, HOST, r))
    const target = `${HOST}:${(upstream.address() as AddressInfo).port}`
    const caps = modelPolicy({ domain: '127.0.0.1', identity: true }) + `
- name: realtime
  type: http
  allow:
    - domains: ["${target}"]
      allow_private: ["127.0.0.0/8"]
      methods: [GET]
      paths: ["/echo"]
  budgets:
    counters:
      - {name: ws_messages, source: websocket.messages, workspace: {max: 100}}
`
    const script = (body: any): any => {
      const last = body.messages.at(-1)
      const sawResults = Array.isArray(last?.content) && last.content.some((c: any) => c.type === 'tool_result')
      if (sawResults) return { text: 'Done.', tools: [{ name: 'finish', input: { summary: 'socket done' } }], usage: { input: 5, output: 3 } }
      return {
        tools: [
          { name: 'write_file', input: { path: 'ws-client.cjs', content: client(target) } },
          { name: 'run_command', input: { command: 'node ws-client.cjs > ws-out.txt 2>&1; cat ws-out.txt' } },
        ],
        usage: { input: 5, output: 3 },
      }
    }
    stack = await startStack({ runtime: RUNTIME, model: script, role: { name: 'realtime', capabilities: caps } })
    upstream.setSecureContext(await stack.upstreamTls(HOST))
  })
  afterAll(async () => {
    upstream?.closeAllConnections()
    await new Promise((r) => upstream?.close(r))
    await stack?.close()
  })

  it('the agent opens a WebSocket through the proxy; the message arrives, and the socket has its one row', async () => {
    const submitted = await stack.corral(['task', 'submit', '--role', 'realtime', 'Open the socket', '--json'])
    expect(submitted.code, submitted.stderr).toBe(0)
    const { task_id: taskId, workspace_id: wsId } = JSON.parse(submitted.stdout)
    const done = await stack.taskDone(taskId)
    expect(done, JSON.stringify(done)).toMatchObject({ status: 'completed' })
    expect(seen).toEqual(['hello from the sandbox'])
    const rows = await stack.until(async () => {
      const r = (await stack.audit(wsId, 'event_type=policy_decision', 'capability_name=realtime'))
      return r.length > 0 && r
    }, 'the socket row')
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ decision: 'allow', destination: HOST, method: 'GET', path: '/echo', task_id: taskId, debits: { ws_messages: 2 } })
    expect(rows[0].detail).toMatchObject({ upstream_status: 101, response_complete: true, websocket: { closed_by: 'agent', close_code: 1000, to_upstream: { messages: 1 }, to_agent: { messages: 1 } } })
    const results = await stack.audit(wsId, 'event_type=tool_result')
    expect(JSON.stringify(results)).toContain('echo: hello from the sandbox')
  })
})
