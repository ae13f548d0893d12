import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { adoptProxyToken, createDispatcher, TokenDispatcher } from '../../src/agent/config.js'
import { HttpEventSink } from '../../src/agent/event-sink.js'
import { HttpTaskSource } from '../../src/agent/task-source.js'
import { startStandInProxy } from '../runtime/stand-ins.js'

/** A stand-in control plane: queued answers for /tasks/next, recorded event posts. */
async function startControlPlane(answers: Array<{ status: number; body?: unknown; retryAfter?: string }>) {
  const events: Array<{ path: string; body: unknown }> = []
  let polls = 0
  const server = http.createServer((req, res) => {
    let raw = ''
    req.on('data', (d) => (raw += d))
    req.on('end', () => {
      if (req.method === 'GET' && req.url === '/tasks/next?token=ahead') {
        polls++
        const a = answers.shift() ?? { status: 410 }
        res.writeHead(a.status, a.retryAfter ? { 'retry-after': a.retryAfter } : {})
        res.end(a.body === undefined ? '' : JSON.stringify(a.body))
        return
      }
      if (req.url === '/task/t1/event' && raw.includes('"refuse"')) {
        res.writeHead(429).end('{"error":{"code":"budget_exhausted"}}')
        return
      }
      events.push({ path: req.url ?? '', body: JSON.parse(raw) })
      res.writeHead(202).end()
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    events,
    polls: () => polls,
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()) }),
  }
}

describe('agent HTTP seams through the proxy', () => {
  let proxy: Awaited<ReturnType<typeof startStandInProxy>>
  beforeAll(async () => {
    proxy = await startStandInProxy()
  })
  afterAll(async () => {
    await proxy.close()
  })

  it('HttpTaskSource waits through 204s (honouring Retry-After), returns tasks, and ends on 410', async () => {
    const cp = await startControlPlane([
      { status: 204, retryAfter: '3' },
      { status: 204 },
      { status: 200, body: { id: 'task_a', description: 'first' } },
      { status: 410 },
    ])
    const dispatcher = createDispatcher({ proxyUrl: `http://127.0.0.1:${proxy.port}`, proxyToken: 'tok_ts' })
    const pauses: number[] = []
    try {
      const source = new HttpTaskSource(cp.url, dispatcher, { pause: async (ms) => pauses.push(ms) })
      expect(await source.next()).toEqual({ id: 'task_a', description: 'first' })
      expect(pauses).toEqual([3000, 1000])
      expect(await source.next()).toBeNull()
      expect(cp.polls()).toBe(4)
      expect(proxy.seen.at(-1)?.proxyAuthorization).toBe('Bearer tok_ts')
    } finally {
      await dispatcher.close()
      await cp.close()
    }
  })

  it('a long poll that answers 204 with Retry-After: 0 is asked again at once; useToken switches the Bearer token', async () => {
    const cp = await startControlPlane([{ status: 204, retryAfter: '0' }, { status: 200, body: { id: 'task_w', description: 'warm' } }, { status: 410 }])
    const dispatcher = createDispatcher({ proxyUrl: `http://127.0.0.1:${proxy.port}`, proxyToken: 'tok_workspace' })
    const pauses: number[] = []
    try {
      const source = new HttpTaskSource(cp.url, dispatcher, { pause: async (ms) => pauses.push(ms) })
      expect(await source.next()).toEqual({ id: 'task_w', description: 'warm' })
      expect(pauses).toEqual([])
      expect(proxy.seen.at(-1)?.proxyAuthorization).toBe('Bearer tok_workspace')
      expect(dispatcher).toBeInstanceOf(TokenDispatcher)
      ;(dispatcher as TokenDispatcher).useToken('tok_task')
      expect(await source.next()).toBeNull()
      expect(proxy.seen.at(-1)?.proxyAuthorization).toBe('Bearer tok_task')
    } finally {
      await dispatcher.close()
      await cp.close()
    }
  })

  it('a token handed ahead of the task is adopted (client and proxy variables) before asking again', async () => {
    const cp = await startControlPlane([{ status: 200, body: { proxy_token: 'tok_ahead' } }, { status: 200, body: { id: 'task_x', description: 'x', proxy_token: 'tok_ahead' } }])
    const dispatcher = createDispatcher({ proxyUrl: `http://127.0.0.1:${proxy.port}`, proxyToken: 'tok_workspace' })
    const env: NodeJS.ProcessEnv = { HTTPS_PROXY: 'http://corral:tok_workspace@127.0.0.1:9', NO_PROXY: 'x' }
    try {
      const source = new HttpTaskSource(cp.url, dispatcher, { adoptToken: (token) => adoptProxyToken(dispatcher, token, env) })
      expect(await source.next()).toEqual({ id: 'task_x', description: 'x', proxy_token: 'tok_ahead' })
      expect(cp.polls()).toBe(2)
      expect(proxy.seen.slice(-2).map((s) => s.proxyAuthorization)).toEqual(['Bearer tok_workspace', 'Bearer tok_ahead'])
      expect(env).toEqual({ HTTPS_PROXY: 'http://corral:tok_ahead@127.0.0.1:9', NO_PROXY: 'x', CORRAL_PROXY_TOKEN: 'tok_ahead' })
    } finally {
      await dispatcher.close()
      await cp.close()
    }
  })

  it('takes the token from proxy URL userinfo (as the proxy variables carry it) and sends it as Bearer', async () => {
    const cp = await startControlPlane([{ status: 410 }])
    const dispatcher = createDispatcher({ proxyUrl: `http://corral:tok.from.url@127.0.0.1:${proxy.port}` })
    try {
      expect(await new HttpTaskSource(cp.url, dispatcher).next()).toBeNull()
      expect(proxy.seen.at(-1)?.proxyAuthorization).toBe('Bearer tok.from.url')
    } finally {
      await dispatcher.close()
      await cp.close()
    }
  })

  it('HttpTaskSource fails loudly on a client error instead of spinning', async () => {
    const cp = await startControlPlane([{ status: 403, body: { error: { code: 'no_match' } } }])
    const dispatcher = createDispatcher({ proxyUrl: `http://127.0.0.1:${proxy.port}`, proxyToken: 'tok' })
    try {
      await expect(new HttpTaskSource(cp.url, dispatcher).next()).rejects.toThrow(/tasks\/next answered 403/)
    } finally {
      await dispatcher.close()
      await cp.close()
    }
  })

  it('HttpEventSink posts each event to /task/<id>/event and reports a refusal once without failing', async () => {
    const cp = await startControlPlane([])
    const dispatcher = createDispatcher({ proxyUrl: `http://127.0.0.1:${proxy.port}`, proxyToken: 'tok_ev' })
    const log: string[] = []
    try {
      const sink = new HttpEventSink(cp.url, dispatcher, (l) => log.push(l))
      await sink.emit('t1', { type: 'task_start', description: 'd' })
      await sink.emit('t1', { type: 'progress_status', note: 'refuse' })
      await sink.emit('t1', { type: 'progress_status', note: 'refuse' })
      await sink.emit('t1', { type: 'task_end', status: 'completed' })
      expect(cp.events).toEqual([
        { path: '/task/t1/event', body: { type: 'task_start', description: 'd' } },
        { path: '/task/t1/event', body: { type: 'task_end', status: 'completed' } },
      ])
      expect(log).toEqual(['corral agent: event progress_status refused (429): {"error":{"code":"budget_exhausted"}}'])
      expect(proxy.seen.filter((s) => s.proxyAuthorization === 'Bearer tok_ev').length).toBeGreaterThan(0)
    } finally {
      await dispatcher.close()
      await cp.close()
    }
  })
})
