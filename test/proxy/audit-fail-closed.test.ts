// Durability and fail-closed at the proxy (issue 14 §2): a request's row is durable before its
// answer completes (a deny before it is sent; an allow's last byte after its row), and while the
// audit log refuses rows (its back-pressure error) nothing is forwarded: `audit_unavailable`, 503,
// Retry-After. The sink here stands in for the audit writer: it holds emits until released (the
// durable write in progress) or refuses them the way src/audit's AuditUnavailableError does.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { AuditEvent, NewAuditEvent } from '../../src/contract/index.js'
import { AuditUnavailableError, createAuditWriter } from '../../src/audit/index.js'
import { RecordingAudit, startHarness, type Harness } from './harness.js'

const CAPS = `
- name: up
  type: http
  allow:
    - domains: ["127.0.0.1"]
      methods: [GET]
`

/** A deny that still gets its tunnel (a CONNECT with no token at all is answered 407 instead). */
const NOT_A_TOKEN = 'not-a-token'

class GatedAudit extends RecordingAudit {
  mode: 'ok' | 'hold' | 'refuse' = 'ok'
  readonly log: string[] = []
  #held: Array<() => void> = []

  override async emit(event: NewAuditEvent): Promise<AuditEvent> {
    if (this.mode === 'refuse') {
      throw new AuditUnavailableError('queue_full', 2, 'the audit log is not keeping up')
    }
    if (this.mode === 'hold') await new Promise<void>((r) => this.#held.push(r))
    const row = await super.emit(event)
    this.log.push(`durable ${row.path}`)
    return row
  }

  get holding(): number {
    return this.#held.length
  }

  release(): void {
    this.mode = 'ok'
    for (const r of this.#held.splice(0)) r()
  }
}

describe('the proxy records before it answers, and fails closed', () => {
  let h: Harness
  const audit = new GatedAudit()
  let upstreamHits = 0
  let token: string
  const until = async (cond: () => boolean): Promise<void> => {
    for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10))
    expect(cond()).toBe(true)
  }

  beforeAll(async () => {
    h = await startHarness({ audit })
    ;({ token } = await h.workspace(CAPS))
    h.up.handler.current = (req: IncomingMessage, res: ServerResponse) => {
      upstreamHits++
      res.writeHead(200, { 'content-type': 'text/plain' })
      res.write('first ')
      setTimeout(() => res.end('last'), 20)
    }
    // Activate the workspace now: its workspace_activated row must not be the one held below.
    expect((await h.fetch(url('/warm'), { token })).status).toBe(200)
  })
  afterAll(async () => {
    audit.release()
    await h.close()
  })

  const url = (p: string): string => `https://127.0.0.1:${h.up.httpsPort}${p}`

  it('a deny is sent only once its row is durable', async () => {
    audit.mode = 'hold'
    const answered = h.fetch(url('/deny-held'), { token: NOT_A_TOKEN }).then((r) => {
      audit.log.push('answer /deny-held')
      return r
    })
    await until(() => audit.holding === 1)
    await new Promise((r) => setTimeout(r, 100))
    expect(audit.log).not.toContain('answer /deny-held')
    audit.release()
    expect((await answered).status).toBe(403)
    expect(audit.log.slice(-2)).toEqual(['durable /deny-held', 'answer /deny-held'])
  })

  it("an allow streams at once, but its response ends only after its row is durable", async () => {
    audit.mode = 'hold'
    const res = await h.open(url('/allow-held'), { token })
    expect(res.status).toBe(200)
    const reader = res.body!.getReader()
    const first = await reader.read()
    expect(new TextDecoder().decode(first.value)).toContain('first')
    await until(() => audit.holding === 1)
    let ended = false
    const rest = (async () => {
      let text = ''
      for (;;) {
        const { value, done } = await reader.read()
        if (done) break
        text += new TextDecoder().decode(value)
      }
      ended = true
      audit.log.push('answer /allow-held')
      return text
    })()
    await new Promise((r) => setTimeout(r, 150))
    expect(ended).toBe(false)
    audit.release()
    expect(await rest).toContain('last')
    expect(audit.log.slice(-2)).toEqual(['durable /allow-held', 'answer /allow-held'])
  })

  it('while the log refuses rows: audit_unavailable 503 with Retry-After, nothing forwarded; it recovers by itself', async () => {
    audit.mode = 'refuse'
    const hits = upstreamHits
    const denied = await h.fetch(url('/while-refused-deny'), { token: NOT_A_TOKEN })
    expect(denied.status).toBe(503)
    expect(denied.headers.get('retry-after')).toBe('2')
    expect(JSON.parse(denied.body).error.reason).toBe('audit_unavailable')
    const allowed = await h.fetch(url('/while-refused-allow'), { token })
    expect(allowed.status).toBe(503)
    expect(JSON.parse(allowed.body).error.reason).toBe('audit_unavailable')
    expect(upstreamHits).toBe(hits)
    audit.mode = 'ok'
    // The next row the log takes (a deny here) reopens the gate without waiting out Retry-After.
    expect((await h.fetch(url('/recovered-deny'), { token: NOT_A_TOKEN })).status).toBe(403)
    const ok = await h.fetch(url('/recovered'), { token })
    expect(ok.status).toBe(200)
    expect(upstreamHits).toBe(hits + 1)
    expect(audit.decisions().map((r) => r.path)).not.toContain('/while-refused-allow')
  })

  it('an allow whose row is refused at its end is cut, never completed', async () => {
    const res = await h.open(url('/refused-at-end'), { token })
    const reader = res.body!.getReader()
    await reader.read()
    audit.mode = 'refuse'
    await expect((async () => {
      for (;;) if ((await reader.read()).done) return 'completed'
    })()).rejects.toThrow()
    audit.mode = 'ok'
  })
})

describe('with the real audit writer', () => {
  it('a closed writer refuses rows: requests are answered audit_unavailable and nothing is forwarded', async () => {
    const dir = await startHarness()
    // A second proxy over the same store whose audit sink is the real writer, closed (shutdown).
    const writer = createAuditWriter(dir.store)
    await writer.close()
    const h = await startHarness({ audit: writer, store: dir.store })
    let hits = 0
    h.up.handler.current = (_req, res) => {
      hits++
      res.end('ok')
    }
    try {
      const { token } = await h.workspace(CAPS)
      for (const t of [undefined, token]) {
        const res = await h.fetch(`https://127.0.0.1:${h.up.httpsPort}/closed`, { token: t ?? NOT_A_TOKEN })
        expect(res.status).toBe(503)
        expect(res.headers.get('retry-after')).toMatch(/^\d+$/)
        expect(JSON.parse(res.body).error.reason).toBe('audit_unavailable')
      }
      expect(hits).toBe(0)
    } finally {
      await h.close().catch(() => {})
      await dir.close().catch(() => {})
    }
  })
})
