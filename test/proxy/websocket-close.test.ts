// A WebSocket's close is passed between the proxy's legs as the peer sent it (docs/proxy.md
// "WebSocket"): the code and the reason the upstream closed with reach the agent — the reason
// scrubbed of injected credentials like every other upstream byte — and the agent's reach the
// upstream; a close without a code stays one without a code. Real `ws` clients and servers, inside
// a CONNECT tunnel. Where the proxy closes for its own reasons (policy, limits, violations) its own
// code and reason are sent instead (test/proxy/websocket-limits.test.ts, test/security/websocket.test.ts).
import type { WebSocket } from 'ws'
import { beforeAll, describe, expect, it } from 'vitest'
import { socketsCaps, wsSuite } from '../helpers/ws-suite.js'
import { closed, opened, wsTunnel } from './ws-helpers.js'

const SECRET = 'sk-ws-close-secret-51c2e8'

const CAPS = socketsCaps(['/upstream-closes', '/agent-closes'])

/** What a close says: `code` undefined is a close frame without a code (1005 to whoever reads it). */
type Close = { code?: number; reason?: string }

const closeWith = (ws: WebSocket, c: Close) => (c.code === undefined ? ws.close() : ws.close(c.code, c.reason))

// 123 bytes of reason, the most a close frame holds, in two-byte characters but the last.
const LONGEST = `${'é'.repeat(61)}x`

describe('WebSocket closes passed between the legs', () => {
  const suite = wsSuite()
  let ws: { workspaceId: string; token: string }
  const upstreamSaw: { code: number; reason: string }[] = []
  let secret = ''

  beforeAll(async () => {
    ws = await suite.keyedWorkspace(CAPS, SECRET)
    // The first message says how to close: the upstream closes so, with the injected key where the
    // reason says KEY (an upstream echoing the credential it was given).
    suite.up.paths.set('/upstream-closes', (up, req) => {
      secret = String(req.headers['x-api-key'] ?? '')
      up.once('message', (data) => closeWith(up, JSON.parse(String(data), (k, v) => (k === 'reason' ? String(v).replace('KEY', secret) : v)) as Close))
    })
    suite.up.paths.set('/agent-closes', (up) => {
      up.once('close', (code, reason) => upstreamSaw.push({ code, reason: reason.toString() }))
    })
  })

  it.each([
    ['a code and a reason', { code: 4321, reason: 'bye from upstream' }, { code: 4321, reason: 'bye from upstream' }],
    ['a registered code without a reason', { code: 1001, reason: '' }, { code: 1001, reason: '' }],
    ['no code at all', {}, { code: 1005, reason: '' }],
    ['the longest reason, in multi-byte characters', { code: 3003, reason: LONGEST }, { code: 3003, reason: LONGEST }],
    ['a reason carrying the injected credential (masked)', { code: 4000, reason: 'bad key KEY, go away' }, { code: 4000, reason: 'bad key ********, go away' }],
  ] as const)('the upstream closes with %s: the agent gets the same', async (_label, sent: Close, expected) => {
    const c = await wsTunnel(suite.h, ws.token, '/upstream-closes')
    expect(await opened(c)).toEqual({ open: true })
    const end = closed(c)
    c.send(JSON.stringify(sent))
    expect(await end).toEqual(expected)
    expect(secret).toBe(SECRET)
    const [row] = await suite.newRows(1)
    expect(row!.detail).toMatchObject({ websocket: { closed_by: 'upstream', close_code: expected.code } })
  })

  it.each([
    ['a code and a reason', { code: 4001, reason: 'agent is done' }, { code: 4001, reason: 'agent is done' }],
    ['no code at all', {}, { code: 1005, reason: '' }],
    ['the longest reason, in multi-byte characters', { code: 1000, reason: LONGEST }, { code: 1000, reason: LONGEST }],
  ] as const)('the agent closes with %s: the upstream gets the same', async (_label, sent: Close, expected) => {
    const c = await wsTunnel(suite.h, ws.token, '/agent-closes')
    expect(await opened(c)).toEqual({ open: true })
    const seen = upstreamSaw.length
    closeWith(c, sent)
    const answered = await closed(c)
    // The proxy answers the agent's close with its code (RFC 6455 5.5.1).
    expect(answered.code).toBe(expected.code)
    const [row] = await suite.newRows(1)
    expect(row!.detail).toMatchObject({ websocket: { closed_by: 'agent', upstream_close_code: expected.code } })
    for (let i = 0; i < 200 && upstreamSaw.length === seen; i++) await new Promise((r) => setTimeout(r, 10))
    expect(upstreamSaw.slice(seen)).toEqual([expected])
  })
})
