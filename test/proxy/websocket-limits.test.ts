// WebSocket limits and lifetimes (docs/proxy.md "WebSocket"): open sockets per workspace, the idle
// timeout, a workspace stopped while its socket is open, and the proxy's shutdown: each closes the
// socket with its documented code and leaves the row.
import { describe, expect, it } from 'vitest'
import { wsSuite } from '../helpers/ws-suite.js'
import { closed, nextMessage, opened, wsTunnel } from './ws-helpers.js'

const CAPS = `
- name: sockets
  type: http
  allow:
    - domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/echo"]
`

describe('WebSocket limits', () => {
  const suite = wsSuite({ limits: { maxWebSocketsPerWorkspace: 1, wsIdleTimeoutMs: 1_500 } })
  const { newRows } = suite


  it('a second open socket of one workspace is refused 429 limit_exceeded; another workspace is not affected', async () => {
    const a = await suite.h.workspace(CAPS)
    const b = await suite.h.workspace(CAPS)
    const first = await wsTunnel(suite.h, a.token, '/echo')
    expect(await opened(first)).toEqual({ open: true })
    const second = await opened(await wsTunnel(suite.h, a.token, '/echo'))
    expect(second).toMatchObject({ open: false, status: 429, reason: 'limit_exceeded' })
    const other = await wsTunnel(suite.h, b.token, '/echo')
    expect(await opened(other)).toEqual({ open: true })
    const [denied] = await newRows(1)
    expect(denied).toMatchObject({ decision: 'deny', reason: 'limit_exceeded', detail: { limit: 'websockets_per_workspace', max: 1 } })
    first.close(1000)
    other.close(1000)
    await Promise.all([closed(first), closed(other)])
    await newRows(3)
    // The slot is free again once the socket closed.
    const again = await wsTunnel(suite.h, a.token, '/echo')
    expect(await opened(again)).toEqual({ open: true })
    again.close(1000)
    await closed(again)
    await newRows(4)
  })

  it('a socket with no message, ping or pong for the idle timeout is closed 1001 by the proxy, with its row', async () => {
    const a = await suite.h.workspace(CAPS)
    const c = await wsTunnel(suite.h, a.token, '/echo')
    expect(await opened(c)).toEqual({ open: true })
    expect(await closed(c)).toEqual({ code: 1001, reason: 'idle_timeout' })
    const [row] = await newRows(1)
    expect(row!.detail).toMatchObject({ websocket: { closed_by: 'proxy', close_code: 1001, close_reason: 'idle_timeout' } })
    expect(suite.up.closes.at(-1)).toBe(1001)
  })

  it('a workspace stopped while its socket is open: the next message closes it 1008 and is not relayed', async () => {
    const a = await suite.h.workspace(CAPS)
    const c = await wsTunnel(suite.h, a.token, '/echo')
    expect(await opened(c)).toEqual({ open: true })
    c.send('before')
    await nextMessage(c)
    expect(await suite.h.proxy.workspaces.deactivate(a.workspaceId)).toBe(true)
    const end = closed(c)
    c.send('after')
    expect(await end).toEqual({ code: 1008, reason: 'workspace_gone' })
    const [row] = await newRows(1)
    expect(row!.detail).toMatchObject({ websocket: { close_code: 1008, close_reason: 'workspace_gone', to_upstream: { messages: 1 } } })
  })

  it('a socket outlives its upgrade, not its token: the first message after the token expired closes it 1008', async () => {
    const a = await suite.h.workspace(CAPS)
    const token = await suite.h.token(a.workspaceId, { ttl: 1 })
    const c = await wsTunnel(suite.h, token, '/echo')
    expect(await opened(c)).toEqual({ open: true })
    c.send('in time')
    await nextMessage(c)
    // Past exp and the 5 s clock tolerance; pings keep the socket from the idle timeout meanwhile.
    const keepAlive = setInterval(() => c.ping(), 500)
    await new Promise((r) => setTimeout(r, 6_500))
    clearInterval(keepAlive)
    const end = closed(c)
    c.send('too late')
    expect(await end).toEqual({ code: 1008, reason: 'token_expired' })
    const [row] = await newRows(1)
    expect(row!.detail).toMatchObject({ websocket: { close_code: 1008, close_reason: 'token_expired', to_upstream: { messages: 1 } } })
  }, 20_000)

  it('the proxy shutting down closes open sockets 1001 and writes their rows before it stops', async () => {
    const a = await suite.h.workspace(CAPS)
    const c = await wsTunnel(suite.h, a.token, '/echo')
    expect(await opened(c)).toEqual({ open: true })
    const end = closed(c)
    await suite.h.restart()
    expect(await end).toEqual({ code: 1001, reason: 'shutdown' })
    const rows = suite.h.audit.decisions().slice(suite.before)
    expect(rows).toHaveLength(1)
    expect(rows[0]!.detail).toMatchObject({ websocket: { closed_by: 'proxy', close_code: 1001, close_reason: 'shutdown' } })
  })
})
