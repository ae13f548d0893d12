// The relay of a response body with backpressure both ways (phases/response-body.ts, the pooled
// client's body read without a stream: pooled-response.ts). Shapes, inside a CONNECT tunnel and
// over plain HTTP, with a large body the upstream writes as fast as its socket takes it: a client
// that stops reading holds the upstream back (the proxy does not read the body into memory), and
// then gets every byte when it reads on; a client that leaves while held back cuts the upstream;
// an upstream that resets while held back cuts the client (never a body that looks complete).
import { createHash, randomBytes } from 'node:crypto'
import type { ServerResponse } from 'node:http'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { AuditEvent } from '../../src/contract/index.js'
import { startHarness, type Harness } from './harness.js'

const MIB = 1024 * 1024
const TOTAL = 64 * MIB
const BLOCK = randomBytes(MIB)
const EXPECTED = ((): string => {
  const hash = createHash('sha256')
  for (let i = 0; i < TOTAL / MIB; i++) hash.update(BLOCK)
  return hash.digest('hex')
})()

const CAPS = `
- name: big
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

/** What the upstream managed to hand its socket of the current answer, and whether it was cut. */
interface Progress {
  written: number
  res?: ServerResponse
  cut: Promise<void>
}

describe('the relay holds back the upstream while the client does not read', () => {
  let h: Harness
  let token = ''
  let before = 0
  let progress: Progress
  const rows = async (n = 1): Promise<AuditEvent[]> => (await h.audit.waitForDecisions(before + n)).slice(before)

  beforeAll(async () => {
    h = await startHarness()
    token = (await h.workspace(CAPS)).token
    h.up.handler.current = (_req, res) => {
      const p = progress
      p.res = res
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(TOTAL) })
      const pump = (): void => {
        while (p.written < TOTAL) {
          p.written += MIB
          if (!res.write(BLOCK)) return void res.once('drain', pump)
        }
        res.end()
      }
      pump()
    }
  })
  afterAll(async () => h.close())
  beforeEach(() => {
    before = h.audit.decisions().length
    let cut!: () => void
    progress = { written: 0, cut: new Promise<void>((r) => (cut = r)) }
    const p = progress
    // Set once the upstream answers: its response closed before all of it was written means cut.
    const watch = setInterval(() => {
      if (!p.res) return
      clearInterval(watch)
      p.res.once('close', () => (p.res!.writableFinished ? undefined : cut()))
    }, 5)
  })

  /** Waits until the upstream's writes stop advancing (it is held back), and returns how far it got. */
  const held = async (): Promise<number> => {
    let last = -1
    let same = 0
    while (same < 5) {
      await new Promise((r) => setTimeout(r, 100))
      if (progress.written === last && progress.res) same++
      else same = 0
      last = progress.written
    }
    return last
  }

  for (const [where, url] of [
    ['inside a CONNECT tunnel', (): string => `https://127.0.0.1:${h.up.httpsPort}/big`],
    ['over plain HTTP', (): string => `http://localhost:${h.up.httpPort}/big`],
  ] as const) {
    describe(where, () => {
      it('a client that stops reading holds the upstream back, then gets every byte', async () => {
        const res = await h.open(url(), { token })
        expect(res.status).toBe(200)
        const reader = res.body!.getReader()
        const hash = createHash('sha256')
        let got = 0
        const first = await reader.read()
        hash.update(first.value!)
        got += first.value!.length
        // Socket buffers on both legs hold some megabytes; the proxy itself holds no more than a chunk or two.
        expect(await held()).toBeLessThan(TOTAL / 2)
        for (let r = await reader.read(); !r.done; r = await reader.read()) {
          hash.update(r.value)
          got += r.value.length
        }
        expect(got).toBe(TOTAL)
        expect(hash.digest('hex')).toBe(EXPECTED)
        const [row] = await rows()
        expect(row).toMatchObject({ decision: 'allow', detail: { upstream_status: 200, response_complete: true } })
        expect(row!.detail).not.toHaveProperty('upstream_error')
      })

      it('a client that leaves while the upstream is held back cuts the upstream', async () => {
        const ac = new AbortController()
        const res = await h.open(url(), { token, signal: ac.signal } as never)
        const reader = res.body!.getReader()
        await reader.read()
        expect(await held()).toBeLessThan(TOTAL)
        ac.abort()
        await progress.cut
        const [row] = await rows()
        expect(row).toMatchObject({ decision: 'allow', detail: { upstream_status: 200, response_complete: false, client_closed: true } })
      })

      it('an upstream that resets while held back cuts the client: never a body that looks complete', async () => {
        const res = await h.open(url(), { token })
        const reader = res.body!.getReader()
        let got = (await reader.read()).value!.length
        expect(await held()).toBeLessThan(TOTAL)
        progress.res!.socket!.destroy()
        const failed = await (async (): Promise<boolean> => {
          try {
            for (let r = await reader.read(); !r.done; r = await reader.read()) got += r.value.length
            return false
          } catch {
            return true
          }
        })()
        expect(failed || got < TOTAL).toBe(true)
        expect(got).toBeLessThan(TOTAL)
        const [row] = await rows()
        expect(row).toMatchObject({ decision: 'allow', detail: { upstream_status: 200, response_complete: false, upstream_error: 'connection_reset' } })
      })
    })
  }
})
