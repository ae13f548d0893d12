import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import https from 'node:https'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createDispatcher, TokenDispatcher } from '../../src/agent/config.js'
import { HttpEventSink } from '../../src/agent/event-sink.js'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/ca.js'
import { startStandInProxy } from '../runtime/stand-ins.js'

// How the agent's client uses the proxy over HTTPS (what a warm claim's first events ride on):
// one tunnel per token and origin, reused by sequential requests, and a token switch that opens
// exactly one new tunnel while the old one is closed with the dispatcher.
let dir: string
let caFile: string
let server: https.Server
let origin: string
const posted: string[] = []

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'corral-agent-conn-'))
  const ca = await loadOrCreateCa(join(dir, 'ca'))
  caFile = join(dir, 'ca.pem')
  await writeFile(caFile, ca.certPem)
  server = https.createServer(await new LeafMinter(ca).pemFor('127.0.0.1'), (req, res) => {
    req.resume()
    req.on('end', () => {
      posted.push(req.url ?? '')
      res.writeHead(202, { 'content-type': 'application/json' }).end('{"status":"accepted"}')
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  origin = `https://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(async () => {
  server.closeAllConnections()
  await new Promise<void>((r) => server.close(() => r()))
  await rm(dir, { recursive: true, force: true })
})

const openConnections = () => new Promise<number>((resolve, reject) => server.getConnections((err, n) => (err ? reject(err) : resolve(n))))

describe('agent connections through the proxy', () => {
  it('sequential events share one tunnel; a token switch opens one tunnel with the new token', async () => {
    const proxy = await startStandInProxy()
    // The replaced token's client outlives the whole test unless closed: its count holds however slow the machine.
    const dispatcher = new TokenDispatcher({ proxyUrl: `http://127.0.0.1:${proxy.port}`, proxyToken: 'tok_workspace', caFile }, 600_000)
    const log: string[] = []
    const sink = new HttpEventSink(origin, dispatcher, (l) => log.push(l))
    const connects = () => proxy.seen.filter((s) => s.method === 'CONNECT')
    try {
      for (let i = 0; i < 4; i++) await sink.emit('t1', { type: 'progress_status', note: `n${i}` })
      expect(connects().map((c) => c.proxyAuthorization)).toEqual(['Bearer tok_workspace'])
      dispatcher.useToken('tok_task')
      await sink.emit('t2', { type: 'session_start' })
      await sink.emit('t2', { type: 'task_start' })
      expect(connects().map((c) => c.proxyAuthorization)).toEqual(['Bearer tok_workspace', 'Bearer tok_task'])
      expect(posted.slice(-6)).toEqual([...Array(4).fill('/task/t1/event'), '/task/t2/event', '/task/t2/event'])
      expect(log).toEqual([])
      // The old token's tunnel is kept briefly after the switch, and closed with the dispatcher.
      expect(await openConnections()).toBe(2)
    } finally {
      await dispatcher.close()
      await proxy.close()
    }
    await expect.poll(openConnections).toBe(0)
  })

  it('closes the replaced token\'s tunnel after the retire delay, keeping the new one', async () => {
    const proxy = await startStandInProxy()
    const dispatcher = new TokenDispatcher({ proxyUrl: `http://127.0.0.1:${proxy.port}`, proxyToken: 'tok_a', caFile }, 50)
    const sink = new HttpEventSink(origin, dispatcher, (l) => { throw new Error(l) })
    try {
      await sink.emit('t4', { type: 'progress_status', note: 'a' })
      const before = await openConnections()
      dispatcher.useToken('tok_b')
      await sink.emit('t4', { type: 'progress_status', note: 'b' })
      // The old tunnel goes once its delay has passed (whenever that is); the new one stays open.
      await expect.poll(openConnections, { timeout: 10_000 }).toBe(before)
      await sink.emit('t4', { type: 'progress_status', note: 'c' })
      expect(proxy.seen.filter((s) => s.method === 'CONNECT').map((c) => c.proxyAuthorization)).toEqual(['Bearer tok_a', 'Bearer tok_b'])
    } finally {
      await dispatcher.close()
      await proxy.close()
    }
    await expect.poll(openConnections).toBe(0)
  })

  it('a dispatcher without a proxy trusts the CA file for direct HTTPS', async () => {
    const dispatcher = createDispatcher({ caFile })
    try {
      const sink = new HttpEventSink(origin, dispatcher, (l) => { throw new Error(l) })
      await sink.emit('t3', { type: 'progress_status', note: 'direct' })
      expect(posted.at(-1)).toBe('/task/t3/event')
    } finally {
      await dispatcher.close()
    }
  })
})
