// WebSocket metering on a relay that streams frames (docs/proxy.md "WebSocket", "Metering"): a
// `websocket.message` counter reads a bounded copy of each text message of its direction, and a
// message too large for that copy is never delivered whole (the socket is closed 1009); binary
// messages and the other direction are not copied; a `websocket.messages` budget refuses a message
// before its first fragment; a `websocket.bytes` budget runs out in the
// middle of a message, which is cut there (4008), and the ledger holds exactly what was relayed.
import { beforeAll, describe, expect, it } from 'vitest'
import type { WebSocket } from 'ws'
import { wsSuite } from '../helpers/ws-suite.js'
import { closed, nextMessage, opened, wsTunnel } from './ws-helpers.js'

const BOUND = 4096

const CAPS = `
- name: metered
  type: http
  allow:
    - domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/events", "/ack", "/bytes"]
  budgets:
    counters:
      - name: tokens
        source: websocket.message
        direction: to_agent
        value: 'event.type == "response.completed" ? event.data.response.usage.total_tokens : 0'
        workspace: { max: 1000 }
      - name: received
        source: websocket.bytes
        direction: to_agent
        workspace: { max: 100000 }
      - name: asked
        source: websocket.messages
        direction: to_upstream
        workspace: { max: 2 }
`

const event = (tokens: number, pad = 0): string => JSON.stringify({ type: 'response.completed', response: { usage: { total_tokens: tokens }, output_text: 'x'.repeat(pad) } })

const send = (ws: WebSocket, data: Buffer | string, opts: { fin: boolean; binary?: boolean }): Promise<void> =>
  new Promise((resolve, reject) => ws.send(data, { binary: false, ...opts }, (err) => (err ? reject(err) : resolve())))

describe('WebSocket metering while frames stream', () => {
  const suite = wsSuite({ limits: { wsMeterMessageBytes: BOUND } })
  const { newRows } = suite

  beforeAll(async () => {
    // "small": one 40-token event; "fragmented": an event of 3 × 3 KiB fragments; "single": one 8 KiB frame.
    suite.up.paths.set('/events', (ws) => ws.on('message', async (m) => {
      const ask = m.toString()
      if (ask === 'small') return send(ws, event(40), { fin: true })
      const big = Buffer.from(event(500, 3 * 3072))
      if (ask === 'single') return send(ws, big, { fin: true })
      for (let i = 0; i < 3; i++) await send(ws, big.subarray(i * 3072, i === 2 ? big.length : (i + 1) * 3072), { fin: i === 2 })
    }))
    suite.up.paths.set('/ack', (ws) => ws.on('message', (m, binary) => {
      if (binary) ws.send(Buffer.alloc(8192, 7), { binary: true })
      else ws.send(`ack ${m.toString().length}`)
    }))
    suite.up.paths.set('/bytes', (ws) => ws.once('message', async () => {
      for (let i = 0; i < 3; i++) await send(ws, Buffer.alloc(40_000, i), { fin: i === 2, binary: true })
    }))
  })

  it('a JSON text message larger than a CEL counter may copy is never delivered whole: closed 1009, the counter named, what was read before debited', async () => {
    for (const shape of ['fragmented', 'single']) {
      const own = await suite.h.workspace(CAPS)
      const closes = suite.up.closes.length
      const c = await wsTunnel(suite.h, own.token, '/events')
      expect(await opened(c)).toEqual({ open: true })
      const got: string[] = []
      c.on('message', (d) => got.push(d.toString()))
      c.send('small')
      await new Promise<void>((r) => c.once('message', () => r()))
      const end = closed(c)
      c.send(shape)
      expect(await end).toEqual({ code: 1009, reason: 'metered_message_too_large' })
      // The 500-token event never arrived; only the small one did.
      expect(got).toHaveLength(1)
      const [row] = await newRows(1)
      expect(row).toMatchObject({ decision: 'allow', debits: { tokens: 40 } })
      expect(row!.detail).toMatchObject({ response_complete: false, websocket: { closed_by: 'proxy', close_code: 1009, close_reason: 'metered_message_too_large', counter: 'tokens', to_agent: { messages: 1 } } })
      const upstreamClosed = Date.now() + 5_000
      while (suite.up.closes.length === closes && Date.now() < upstreamClosed) await new Promise((r) => setTimeout(r, 10))
      expect(suite.up.closes.at(-1)).toBe(1009)
      suite.before++
    }
  })

  it('only text messages of the counter’s direction are copied: 8 KiB to the upstream and 8 KiB of binary to the agent pass', async () => {
    const own = await suite.h.workspace(CAPS)
    const c = await wsTunnel(suite.h, own.token, '/ack')
    expect(await opened(c)).toEqual({ open: true })
    c.send('y'.repeat(8192))
    expect((await nextMessage(c)).data.toString()).toBe('ack 8192')
    c.send(Buffer.from('binary please'))
    const bin = await nextMessage(c)
    expect(bin).toMatchObject({ binary: true })
    expect(bin.data.length).toBe(8192)
    c.close(1000)
    expect((await closed(c)).code).toBe(1000)
    const [row] = await newRows(1)
    // Neither is a JSON event: `value` is not evaluated, the counter is floored, failure_charge (0) debited.
    expect(row).toMatchObject({ debits: { tokens: 0, received: 8 + 8192 }, floored: { tokens: 'parse_failed' } })
    expect(row!.detail).toMatchObject({ response_complete: true, websocket: { to_upstream: { messages: 2, bytes: 8192 + 13 }, to_agent: { messages: 2, bytes: 8 + 8192 } } })
  })

  it('a message budget is taken when a message begins: the message it cannot cover is not started, not even its first fragment', async () => {
    const own = await suite.h.workspace(CAPS)
    const c = await wsTunnel(suite.h, own.token, '/ack')
    expect(await opened(c)).toEqual({ open: true })
    c.send('one')
    await nextMessage(c)
    c.send('two')
    await nextMessage(c)
    const end = closed(c)
    c.send('three, first fragment', { fin: false })
    c.send(' and the last', { fin: true })
    expect(await end).toEqual({ code: 4008, reason: 'budget_exhausted' })
    const [row] = await newRows(1)
    expect(row).toMatchObject({ debits: { asked: 2 } })
    expect(row!.detail).toMatchObject({ websocket: { counter: 'asked', to_upstream: { messages: 2, bytes: 6 } } })
  })

  it('a byte budget that runs out in the middle of a message cuts it there: 4008, and the ledger holds what was relayed', async () => {
    const own = await suite.h.workspace(CAPS)
    const c = await wsTunnel(suite.h, own.token, '/bytes')
    expect(await opened(c)).toEqual({ open: true })
    let messages = 0
    c.on('message', () => messages++)
    const end = closed(c)
    c.send('go')
    expect(await end).toEqual({ code: 4008, reason: 'budget_exhausted' })
    expect(messages).toBe(0)
    const [row] = await newRows(1)
    const ws = (row!.detail as { websocket: { to_agent: { messages: number; bytes: number } } }).websocket
    const debit = (row!.debits as { received: number }).received
    // Two fragments (80 000 bytes) fit under 100 000; the third was cut where the ceiling refused a chunk of it.
    expect(debit).toBeGreaterThanOrEqual(80_000)
    expect(debit).toBeLessThanOrEqual(100_000)
    expect(ws.to_agent).toEqual({ messages: 0, frames: 3, bytes: debit })
    expect(row!.detail).toMatchObject({ websocket: { close_code: 4008, counter: 'received' } })
    expect((row!.budget_state as Record<string, { workspace: { used: number } }>).received!.workspace.used).toBe(debit)
  })
})
