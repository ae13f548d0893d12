import { createHash, randomBytes } from 'node:crypto'
import { mkdtemp, rm, stat } from 'node:fs/promises'
import http from 'node:http'
import net, { type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ProxyBridge } from '../../src/runtime/proxy-bridge.js'
import { startStandInProxy, startTarget } from './stand-ins.js'

describe(ProxyBridge.name, () => {
  let dir: string
  let proxy: Awaited<ReturnType<typeof startStandInProxy>>
  let target: Awaited<ReturnType<typeof startTarget>>

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'corral-bridge-'))
    proxy = await startStandInProxy()
    target = await startTarget()
  })
  afterAll(async () => {
    await proxy.close()
    await target.close()
    await rm(dir, { recursive: true, force: true })
  })

  it('relays an HTTP request through the unix socket to the proxy and on to a loopback server', async () => {
    const bridge = await ProxyBridge.open(join(dir, 'a.sock'), { host: '127.0.0.1', port: proxy.port })
    try {
      const res = await new Promise<{ status?: number; body: string }>((resolve, reject) => {
        const req = http.request({ socketPath: bridge.socketPath, method: 'GET', path: `http://127.0.0.1:${target.port}/via-bridge`, headers: { 'proxy-authorization': 'Bearer tok' } }, (r) => {
          let body = ''
          r.setEncoding('utf8')
          r.on('data', (d) => (body += d))
          r.on('end', () => resolve({ status: r.statusCode, body }))
        })
        req.on('error', reject)
        req.end()
      })
      expect(res).toEqual({ status: 200, body: 'hello from outside' })
      expect(proxy.seen.at(-1)).toEqual({ method: 'GET', url: `http://127.0.0.1:${target.port}/via-bridge`, proxyAuthorization: 'Bearer tok' })
    } finally {
      await bridge.close()
    }
  })

  it('carries large streams both ways intact and forwards half-close (back-pressure through pipe)', async () => {
    // An echo server that answers only after the client half-closes: it proves FIN is relayed.
    const echo = net.createServer({ allowHalfOpen: true }, (s) => {
      const chunks: Buffer[] = []
      s.on('data', (c) => chunks.push(c))
      s.on('end', () => s.end(Buffer.concat(chunks)))
    })
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r))
    const bridge = await ProxyBridge.open(join(dir, 'b.sock'), { host: '127.0.0.1', port: (echo.address() as AddressInfo).port })
    try {
      const payload = randomBytes(16 * 1024 * 1024)
      const received = await new Promise<Buffer>((resolve, reject) => {
        const c = net.createConnection({ path: bridge.socketPath, allowHalfOpen: true })
        const chunks: Buffer[] = []
        c.on('data', (d) => chunks.push(d))
        c.on('end', () => resolve(Buffer.concat(chunks)))
        c.on('error', reject)
        c.end(payload)
      })
      expect(received.length).toBe(payload.length)
      expect(createHash('sha256').update(received).digest('hex')).toBe(createHash('sha256').update(payload).digest('hex'))
    } finally {
      await bridge.close()
      echo.close()
    }
  })

  it('cuts open relays and removes its socket on close; a stale socket file does not block a restart', async () => {
    const hold = net.createServer((s) => s.on('data', () => {}))
    await new Promise<void>((r) => hold.listen(0, '127.0.0.1', r))
    const path = join(dir, 'c.sock')
    const first = await ProxyBridge.open(path, { host: '127.0.0.1', port: (hold.address() as AddressInfo).port })
    const c = net.createConnection({ path })
    await new Promise((r) => c.once('connect', r))
    const closed = new Promise((r) => c.once('close', r))
    await first.close()
    await closed
    await expect(stat(path)).rejects.toMatchObject({ code: 'ENOENT' })

    // A crash leaves the socket file behind; the next open replaces it.
    const stale = net.createServer()
    await new Promise<void>((r) => stale.listen(path, r))
    stale.close()
    const second = await ProxyBridge.open(path, { host: '127.0.0.1', port: proxy.port })
    await second.close()
    hold.close()
  })

  it('closes the inner connection when the proxy is unreachable', async () => {
    const unused = net.createServer()
    await new Promise<void>((r) => unused.listen(0, '127.0.0.1', r))
    const port = (unused.address() as AddressInfo).port
    await new Promise((r) => unused.close(r))
    const bridge = await ProxyBridge.open(join(dir, 'd.sock'), { host: '127.0.0.1', port })
    try {
      const c = net.createConnection({ path: bridge.socketPath })
      c.on('error', () => {})
      await new Promise((r) => c.once('close', r))
    } finally {
      await bridge.close()
    }
  })
})
