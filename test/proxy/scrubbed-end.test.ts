// A response the proxy scans for the credential it injected goes to the agent chunked (a mask is
// not as long as what it hides). When the upstream declared the body's length, the chunk that
// completes it is sent together with the end of the response, after the request's row is recorded
// (one write instead of two): the agent never holds the last of such a body without its row (of a
// body in one chunk, nothing at all: the head goes out with it), and a body that arrives in
// several chunks still streams up to its last one.
import { join } from 'node:path'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { AuditEvent, NewAuditEvent } from '../../src/contract/index.js'
import { AuditUnavailableError } from '../../src/audit/index.js'
import { isStaticAuthProvider } from '../../src/policy/index.js'
import { OrgMaterialAdmin, Sealer, loadMasterKey } from '../../src/secrets/index.js'
import { Scrubber } from '../../src/proxy/scrub.js'
import { RecordingAudit, startHarness, type Harness } from './harness.js'

const CAPS = `
- name: gh
  type: http
  allow:
    - name: api
      domains: ["127.0.0.1"]
      methods: [GET]
  transforms:
    - name: gh-auth
      applies_to: [api]
      auth: { credential: github-bot, provider: github }
`
const GH = 'ghp_scrubbedendtoken42'

/** Holds policy_decision rows until released, or refuses those of paths starting with /refused. */
class GatedAudit extends RecordingAudit {
  hold = false
  readonly log: string[] = []
  #held: Array<() => void> = []

  override async emit(event: NewAuditEvent): Promise<AuditEvent> {
    if (event.event_type === 'policy_decision' && event.path?.startsWith('/refused')) {
      throw new AuditUnavailableError('queue_full', 1, 'the audit log is not keeping up')
    }
    if (this.hold && event.event_type === 'policy_decision') await new Promise<void>((r) => this.#held.push(r))
    const row = await super.emit(event)
    if (row.event_type === 'policy_decision') this.log.push(`durable ${row.path}`)
    return row
  }

  get holding(): number {
    return this.#held.length
  }

  release(): void {
    this.hold = false
    for (const r of this.#held.splice(0)) r()
  }
}

describe('a scanned answer of declared length ends in one write, after its row', () => {
  let h: Harness
  const audit = new GatedAudit()
  let token = ''
  const url = (p: string): string => `https://127.0.0.1:${h.up.httpsPort}${p}`
  const until = async (cond: () => boolean): Promise<void> => {
    for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10))
    expect(cond()).toBe(true)
  }

  beforeAll(async () => {
    h = await startHarness({ audit, logger: { error: () => {}, warn: () => {} } })
    const admin = new OrgMaterialAdmin(h.store, new Sealer(await loadMasterKey(join(h.dir, 'data'))), h.audit, isStaticAuthProvider)
    await admin.createCredential({ orgId: h.orgId, userId: h.userId }, { name: 'github-bot', provider: 'github', kind: 'static_token', token: GH })
    token = (await h.workspace(CAPS)).token
    h.up.handler.current = (req: IncomingMessage, res: ServerResponse) => {
      const body = `echo ${String(req.headers.authorization)} for ${req.url}.`
      if (req.url?.includes('two-parts')) {
        const second = ' and the rest'
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body) + second.length })
        res.write(body)
        setTimeout(() => res.end(second), 50)
        return
      }
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body) })
      res.end(body)
    }
    // Activate the workspace now: its workspace_activated row is not one of those gated below.
    expect((await h.fetch(url('/warm'), { token })).status).toBe(200)
  })
  afterAll(async () => {
    audit.release()
    await h.close()
  })

  /** Everything the client read of the body, and whether the body ended or broke. */
  const readAll = async (res: Response): Promise<{ text: string; outcome: 'ended' | 'cut' }> => {
    const reader = res.body!.getReader()
    let text = ''
    try {
      for (;;) {
        const { value, done } = await reader.read()
        if (done) return { text, outcome: 'ended' }
        text += new TextDecoder().decode(value)
      }
    } catch {
      return { text, outcome: 'cut' }
    }
  }

  it('recorded: nothing of a one-chunk answer reaches the agent before its row is durable; then all of it, chunked and masked', async () => {
    audit.hold = true
    let answered = false
    const opened = h.open(url('/one-part'), { token }).then((res) => {
      answered = true
      audit.log.push('answer /one-part')
      return res
    })
    await until(() => audit.holding === 1)
    await new Promise((r) => setTimeout(r, 100))
    expect(answered).toBe(false)
    audit.release()
    const res = await opened
    expect(res.status).toBe(200)
    expect(res.headers.get('content-length')).toBeNull()
    const { text, outcome } = await readAll(res)
    expect(outcome).toBe('ended')
    expect(text).toBe('echo ******** for /one-part.')
    expect(audit.log.slice(-2)).toEqual(['durable /one-part', 'answer /one-part'])
  })

  it('a body in two chunks: the first streams at once, the last waits for the row', async () => {
    audit.hold = true
    const res = await h.open(url('/two-parts'), { token })
    const reader = res.body!.getReader()
    const first = await reader.read()
    expect(new TextDecoder().decode(first.value)).toBe('echo ******** for /two-parts.')
    await until(() => audit.holding === 1)
    let rest = ''
    let ended = false
    const reading = (async () => {
      for (;;) {
        const { value, done } = await reader.read()
        if (done) break
        rest += new TextDecoder().decode(value)
      }
      ended = true
    })()
    await new Promise((r) => setTimeout(r, 100))
    expect(ended).toBe(false)
    expect(rest).toBe('')
    audit.release()
    await reading
    expect(rest).toBe(' and the rest')
  })

  it('refused at the end: the agent gets nothing of a one-chunk answer, only a cut connection', async () => {
    await expect(h.open(url('/refused-one-part'), { token })).rejects.toThrow()
  })
})

describe('the header pass of the scan', () => {
  it('hands back the headers it was given when no needle occurs in them, and masks exactly as before when one does', () => {
    const s = new Scrubber(['Bearer tok-12345678', 'tok-12345678'])
    const clean = { 'content-type': 'application/json', 'set-cookie': ['a=1', 'b=2'], 'x-request-id': 'abc' }
    expect(s.headers(clean)).toBe(clean)
    expect(s.count).toBe(0)
    const echoed = { 'content-type': 'text/plain', 'x-echo': 'got tok-12345678', 'set-cookie': ['a=1', 'b=tok-12345678'], 'x-tok-12345678': 'v' }
    const out = s.headers(echoed)
    expect(out).not.toBe(echoed)
    expect(out).toEqual({ 'content-type': 'text/plain', 'x-echo': 'got ********', 'set-cookie': ['a=1', 'b=********'] })
    // A needle found only across two headers' text (never within one) changes nothing.
    const across = { 'x-a': 'tok-1234', 'x-b': '5678' }
    expect(s.headers(across)).toEqual(across)
  })

  it('two scans of the same injected values find the same spellings (their needles are built once)', () => {
    const value = 'zz-Secret-Value-42'
    const a = new Scrubber([value]).scan()
    const b = new Scrubber([value]).scan()
    const body = Buffer.from(`x ${value} y ${Buffer.from(value).toString('base64')} z`)
    expect(a.push(body).toString() + (a.end()?.toString() ?? '')).toBe(b.push(body).toString() + (b.end()?.toString() ?? ''))
    expect(new Scrubber([value]).scan().push(body).toString()).not.toContain(value)
  })
})
