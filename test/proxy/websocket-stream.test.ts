// WebSocket frames are relayed as they arrive, never gathered into whole messages (docs/proxy.md
// "WebSocket"): real `ws` upstreams that hold back a message's last fragment until the agent's
// `ws` client has read the first one off its socket (a relay that gathered messages would wait
// forever), a credential split across fragments (or sent in a ping) still masked, a ping between two fragments
// relayed in its place, and a 64 MiB message through the proxy while the proxy's own memory holds
// none of it (the client in a process of its own).
import { spawn } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import type { Socket } from 'node:net'
import { join } from 'node:path'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { beforeAll, describe, expect, it } from 'vitest'
import type { WebSocket } from 'ws'
import { isStaticAuthProvider } from '../../src/policy/index.js'
import { OrgMaterialAdmin, Sealer, loadMasterKey } from '../../src/secrets/index.js'
import { wsSuite } from '../helpers/ws-suite.js'
import { closed, nextMessage, opened, wsTunnel } from './ws-helpers.js'

const SECRET = 'sk-ws-secret-7f3a91'
const MIB = 1024 * 1024

const CAPS = `
- name: streams
  type: http
  allow:
    - name: plain
      domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/slow", "/pinged", "/echo", "/huge"]
      allow_insecure: true
    - name: keyed
      domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/split", "/split-b64", "/ping-secret"]
  transforms:
    - name: key
      applies_to: [keyed]
      header: { name: x-api-key, action: set, value: 'secrets["api_key"]' }
`

/** What the agent's socket has read so far (plaintext inside TLS; frames from a server are unmasked). */
function wire(c: WebSocket): { text(): string } {
  const chunks: Buffer[] = []
  ;(c as unknown as { _socket: Socket })._socket.on('data', (b: Buffer) => chunks.push(b))
  return { text: () => Buffer.concat(chunks).toString('utf8') }
}

/** Waits (at most 5 s) for `cond`; false if it never held. */
async function until(cond: () => boolean, ms = 5_000): Promise<boolean> {
  const end = Date.now() + ms
  while (!cond() && Date.now() < end) await new Promise((r) => setTimeout(r, 5))
  return cond()
}

function gate(): { wait: Promise<void>; open(): void } {
  let open!: () => void
  const wait = new Promise<void>((r) => (open = r))
  return { wait, open }
}

/**
 * Bytes of live buffers after collecting garbage: the least of a few rounds, since V8 frees the
 * memory of dead buffers on a background thread after the collection.
 */
async function retained(gc: () => void): Promise<number> {
  let least = Infinity
  for (let i = 0; i < 8; i++) {
    gc()
    await new Promise((r) => setTimeout(r, 50))
    least = Math.min(least, process.memoryUsage().arrayBuffers)
  }
  return least
}

const send = (ws: WebSocket, data: Buffer | string, opts: { fin: boolean; binary?: boolean }): Promise<void> =>
  new Promise((resolve, reject) => ws.send(data, { binary: false, ...opts }, (err) => (err ? reject(err) : resolve())))

describe('WebSocket frames stream through the proxy', () => {
  const suite = wsSuite({ limits: { wsMaxMessageBytes: 128 * MIB } })
  const { newRows } = suite
  let token: string

  beforeAll(async () => {
    const admin = new OrgMaterialAdmin(suite.h.store, new Sealer(await loadMasterKey(join(suite.h.dir, 'data'))), suite.h.audit, isStaticAuthProvider)
    await admin.setSecret({ orgId: suite.h.orgId, userId: suite.h.userId }, 'api_key', SECRET)
    token = (await suite.h.workspace(CAPS)).token
  })

  it('the first fragment of a message reaches the agent before the upstream sends the last one', async () => {
    const last = gate()
    suite.up.paths.set('/slow', (ws) => ws.once('message', async () => {
      await send(ws, 'first fragment, sent alone.', { fin: false })
      await last.wait
      await send(ws, ' last fragment.', { fin: true })
    }))
    const c = await wsTunnel(suite.h, token, '/slow')
    expect(await opened(c)).toEqual({ open: true })
    const seen = wire(c)
    const whole = nextMessage(c)
    c.send('go')
    // A relay that gathered whole messages would hold the first fragment until the last: never here.
    expect(await until(() => seen.text().includes('first fragment, sent alone.'))).toBe(true)
    last.open()
    expect((await whole).data.toString()).toBe('first fragment, sent alone. last fragment.')
    c.close(1000)
    await closed(c)
    const [row] = await newRows(1)
    expect(row!.detail).toMatchObject({ response_complete: true, websocket: { to_agent: { messages: 1, frames: 2, bytes: 42 }, to_upstream: { messages: 1, frames: 1, bytes: 2 } } })
  })

  it('a credential split across fragments is masked whole, in UTF-8 text that stays valid, while the fragments stream', async () => {
    const cases: { path: string; value: string }[] = [
      { path: '/split', value: SECRET },
      { path: '/split-b64', value: Buffer.from(SECRET).toString('base64') },
    ]
    for (const { path, value } of cases) {
      const rest = gate()
      // "é" and "€" around the value; the second fragment also cuts "€" in two (legal inside a message).
      const euro = Buffer.from('€')
      const one = Buffer.concat([Buffer.from(`before é ${value.slice(0, 7)}`)])
      const two = Buffer.concat([Buffer.from(`${value.slice(7, 12)}`)])
      const three = Buffer.concat([Buffer.from(`${value.slice(12)} €after `), euro.subarray(0, 1)])
      const four = Buffer.concat([euro.subarray(1), Buffer.from(' end')])
      suite.up.paths.set(path, (ws) => ws.once('message', async () => {
        await send(ws, one, { fin: false })
        await rest.wait
        await send(ws, two, { fin: false })
        await send(ws, three, { fin: false })
        await send(ws, four, { fin: true })
      }))
      const c = await wsTunnel(suite.h, token, path)
      expect(await opened(c)).toEqual({ open: true })
      expect(suite.up.last.headers['x-api-key']).toBe(SECRET)
      const seen = wire(c)
      const whole = nextMessage(c)
      c.send('go')
      expect(await until(() => seen.text().includes('before é'))).toBe(true)
      // The start of the value is held back (it may begin a secret), not sent.
      expect(seen.text()).not.toContain(value.slice(0, 7))
      rest.open()
      const text = (await whole).data.toString('utf8')
      expect(text).toBe('before é ******** €after € end')
      expect(seen.text()).not.toContain(value.slice(0, 7))
      c.close(1000)
      // A valid close: the agent's `ws` found every byte of the text message valid UTF-8.
      expect((await closed(c)).code).toBe(1000)
      await newRows(1)
      suite.before++
    }
  })

  it('a ping from the upstream carrying the credential reaches the agent masked', async () => {
    suite.up.paths.set('/ping-secret', (ws, req) => ws.once('message', () => {
      ws.ping(`key=${String(req.headers['x-api-key'])}`)
      ws.send('done')
    }))
    const c = await wsTunnel(suite.h, token, '/ping-secret')
    expect(await opened(c)).toEqual({ open: true })
    const pinged = new Promise<string>((r) => c.once('ping', (d: Buffer) => r(d.toString())))
    const done = nextMessage(c)
    c.send('go')
    expect(await pinged).toBe('key=********')
    expect((await done).data.toString()).toBe('done')
    c.close(1000)
    await closed(c)
    await newRows(1)
  })

  it('a ping between two fragments is relayed in its place, both ways, and answered', async () => {
    const rest = gate()
    suite.up.paths.set('/pinged', (ws) => ws.once('message', async () => {
      await send(ws, 'before the ping.', { fin: false })
      ws.ping('mid-message')
      await rest.wait
      await send(ws, ' after it.', { fin: true })
    }))
    const c = await wsTunnel(suite.h, token, '/pinged')
    expect(await opened(c)).toEqual({ open: true })
    const seen = wire(c)
    const pinged = new Promise<{ payload: string; sawFirst: boolean }>((r) => c.once('ping', (d: Buffer) => r({ payload: d.toString(), sawFirst: seen.text().includes('before the ping.') })))
    const whole = nextMessage(c)
    c.send('go')
    // The ping arrives after the fragment sent before it, and before the message is whole.
    expect(await pinged).toEqual({ payload: 'mid-message', sawFirst: true })
    rest.open()
    expect((await whole).data.toString()).toBe('before the ping. after it.')
    c.close(1000)
    await closed(c)
    // From the agent: a fragmented message with a ping inside it reaches the upstream whole; the ping is answered.
    const echo = await wsTunnel(suite.h, token, '/echo')
    expect(await opened(echo)).toEqual({ open: true })
    const pong = new Promise<string>((r) => echo.once('pong', (d: Buffer) => r(d.toString())))
    const back = nextMessage(echo)
    echo.send('frag', { fin: false })
    echo.ping('between')
    echo.send('mented', { fin: true })
    expect(await pong).toBe('between')
    expect((await back).data.toString()).toBe('fragmented')
    echo.close(1000)
    await closed(echo)
    const rows = await newRows(2)
    expect(rows[0]!.detail).toMatchObject({ websocket: { pings: 1, to_agent: { messages: 1 } } })
    expect(rows[1]!.detail).toMatchObject({ websocket: { pings: 1, to_upstream: { messages: 1 }, to_agent: { messages: 1 } } })
  })

  it('a 64 MiB message streams through: the client has read 63 MiB before the last fragment is sent, and the proxy holds none of it', async () => {
    setFlagsFromString('--expose-gc')
    const gc = runInNewContext('gc') as () => void
    const fragment = randomBytes(MIB)
    const hash = createHash('sha256')
    for (let i = 0; i < 64; i++) hash.update(fragment)
    const last = gate()
    suite.up.paths.set('/huge', (ws) => ws.once('message', async () => {
      for (let i = 0; i < 63; i++) await send(ws, fragment, { fin: false, binary: true })
      await last.wait
      await send(ws, fragment, { fin: true, binary: true })
    }))
    const child = spawn(process.execPath, [join(import.meta.dirname, 'ws-stream-client.mjs'), new URL(suite.h.proxyUrl).port, `127.0.0.1:${suite.h.up.httpPort}`, '/huge', token], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    const events: { type: string; n?: number; size?: number; sha256?: string; code?: number; message?: string }[] = []
    child.on('message', (m) => events.push(m as (typeof events)[number]))
    try {
      expect(await until(() => events.some((e) => e.type === 'open' || e.type === 'error'), 10_000)).toBe(true)
      const base = await retained(gc)
      const read = (): number => Math.max(0, ...events.map((e) => e.n ?? 0))
      // 63 MiB read by the agent while the upstream still holds the message's last fragment.
      expect(await until(() => read() >= 63 * MIB, 60_000)).toBe(true)
      const held = (await retained(gc)) - base
      expect(held).toBeLessThan(16 * MIB)
      last.open()
      expect(await until(() => events.some((e) => e.type === 'message'), 30_000)).toBe(true)
      expect(events.find((e) => e.type === 'message')).toMatchObject({ size: 64 * MIB, sha256: hash.digest('hex') })
      expect(await until(() => events.some((e) => e.type === 'close'), 10_000)).toBe(true)
    } finally {
      child.kill()
    }
    const [row] = await newRows(1)
    expect(row!.detail).toMatchObject({ websocket: { to_agent: { messages: 1, frames: 64, bytes: 64 * MIB } } })
  }, 120_000)
})
