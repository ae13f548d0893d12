// The listeners a relayed request puts on the client's response (runner.ts, phases/response-body.ts):
// no `once` wrapper (an allocation and a removal per listener per request; a response emits
// 'close', 'error' and 'finish' once anyway) and no 'drain' listener unless a write to the client
// was refused. Counted on real responses, inside a tunnel and over plain HTTP; the relay's
// backpressure itself is relay.test.ts's.
import { EventEmitter } from 'node:events'
import { ServerResponse } from 'node:http'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi, type MockInstance } from 'vitest'
import { startHarness, type Harness } from './harness.js'

const CAPS = `
- name: up
  type: http
  allow:
    - name: tls
      domains: ["127.0.0.1"]
      methods: [GET]
    - name: plain
      domains: ["localhost"]
      methods: [GET]
      allow_insecure: true
`
const BIG = 4 * 1024 * 1024

describe('listeners on the client response per relayed request', () => {
  let h: Harness
  let token = ''
  let on: MockInstance
  let once: MockInstance
  /** Calls on the proxy's responses to clients: the upstream's own responses are marked and left out. */
  const upstreamResponses = new WeakSet<object>()
  const calls = (spy: MockInstance, event?: string): number =>
    spy.mock.calls.filter((args, i) => {
      const self = spy.mock.contexts[i] as object
      return self instanceof ServerResponse && !upstreamResponses.has(self) && (event === undefined || args[0] === event)
    }).length

  beforeAll(async () => {
    h = await startHarness()
    token = (await h.workspace(CAPS)).token
    h.up.handler.current = (req, res) => {
      upstreamResponses.add(res)
      if (req.url === '/big') return void res.end(Buffer.alloc(BIG, 7))
      res.end('small answer')
    }
  })
  afterAll(async () => h.close())
  beforeEach(() => {
    on = vi.spyOn(EventEmitter.prototype, 'on')
    once = vi.spyOn(EventEmitter.prototype, 'once')
  })
  afterEach(() => {
    on.mockRestore()
    once.mockRestore()
  })

  for (const [where, base] of [
    ['inside a CONNECT tunnel', (): string => `https://127.0.0.1:${h.up.httpsPort}`],
    ['over plain HTTP', (): string => `http://localhost:${h.up.httpPort}`],
  ] as const) {
    it(`${where}: a small answer adds no once wrapper and no 'drain' listener`, async () => {
      for (let i = 0; i < 5; i++) {
        const res = await h.fetch(`${base()}/small`, { token })
        expect(res).toMatchObject({ status: 200, body: 'small answer' })
      }
      expect(calls(once)).toBe(0)
      expect(calls(on, 'drain')).toBe(0)
      // The relay still listens for the response's end and its cuts.
      expect(calls(on, 'close')).toBeGreaterThanOrEqual(5)
      expect(calls(on, 'finish')).toBeGreaterThanOrEqual(5)
    })

    it(`${where}: an answer larger than the client's buffer waits for 'drain' and arrives whole`, async () => {
      const res = await h.fetch(`${base()}/big`, { token })
      expect(res.status).toBe(200)
      expect(res.body.length).toBe(BIG)
      expect(calls(once, 'drain')).toBeGreaterThanOrEqual(1)
    })
  }
})
