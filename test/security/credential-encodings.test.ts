// Attack catalogue, credentials echoed in another spelling: an upstream that reflects its request
// JSON-escaped, percent-encoded, form-encoded, base64 (at any alignment), base64url or hex must
// not hand the agent the bytes the proxy injected, in headers or in a body split anywhere; and a
// mask must not tell the agent how long the secret was. Before the fix only the verbatim bytes
// were masked (each byte became "*", so the length showed) and every other spelling went through.
// Shapes: a fast-check fuzz of the streaming scan (a secret at a random offset in random text,
// encoded whole in each form, cut into random chunks) and the real proxy with an echoing upstream.
import { join } from 'node:path'
import type { IncomingMessage } from 'node:http'
import fc from 'fast-check'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { AuditEvent } from '../../src/contract/index.js'
import { isStaticAuthProvider } from '../../src/policy/index.js'
import { Scrubber } from '../../src/proxy/scrub.js'
import { OrgMaterialAdmin, Sealer, loadMasterKey } from '../../src/secrets/index.js'
import { startHarness, type Harness } from '../proxy/harness.js'
import { connectRequest } from './raw.js'

const b64 = (b: Buffer): string => b.toString('base64')
const b64url = (b: Buffer): string => b.toString('base64url')

/** How the upstream spells the whole text (the secret inside it), and how to read it back. */
const FORMS: Record<string, { encode: (text: string) => string; decode?: (s: string) => string }> = {
  json: { encode: (t) => JSON.stringify(t), decode: (s) => JSON.parse(s) as string },
  'json, php style': { encode: (t) => JSON.stringify(t).replace(/\//g, '\\/').replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`), decode: (s) => JSON.parse(s) as string },
  percent: { encode: encodeURIComponent, decode: decodeURIComponent },
  'percent, lower-case hex': { encode: (t) => encodeURIComponent(t).replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase()), decode: decodeURIComponent },
  form: { encode: (t) => new URLSearchParams({ q: t }).toString().slice(2), decode: (s) => new URLSearchParams(`q=${s}`).get('q')! },
  base64: { encode: (t) => b64(Buffer.from(t)) },
  base64url: { encode: (t) => b64url(Buffer.from(t)) },
  hex: { encode: (t) => Buffer.from(t).toString('hex') },
  'HEX upper-case': { encode: (t) => Buffer.from(t).toString('hex').toUpperCase() },
  'base64 in a URL': { encode: (t) => encodeURIComponent(b64(Buffer.from(t))) },
  'base64 in JSON': { encode: (t) => JSON.stringify(b64(Buffer.from(t))).replace(/\//g, '\\/') },
}

/**
 * The characters of `encoded` that spell the secret alone, found by encoding the text with and
 * without it (independent of how the scrubber derives its needles): for base64 the characters
 * wholly inside the secret's bits, for the others the secret's own escaped span.
 */
function core(form: string, before: string, secret: string, after: string): string {
  const p = Buffer.byteLength(before)
  const n = Buffer.byteLength(secret)
  const enc = FORMS[form]!.encode(before + secret + after)
  if (form.startsWith('base64') && !form.includes(' in ')) return enc.slice(Math.ceil((p * 8) / 6), Math.floor(((p + n) * 8) / 6))
  if (form.startsWith('hex') || form.startsWith('HEX')) return enc.slice(2 * p, 2 * (p + n))
  if (form.includes(' in ')) return '' // checked through the decoded base64 below
  // The escaped span: what the encoding of before+secret adds to the encoding of before.
  const head = FORMS[form]!.encode(before)
  const withSecret = FORMS[form]!.encode(before + secret)
  const strip = form.startsWith('json') ? 1 : 0
  return withSecret.slice(head.length - strip, withSecret.length - strip)
}

function scanInChunks(s: Scrubber, text: string, cuts: number[]): string {
  const bytes = Buffer.from(text)
  const scan = s.scan()
  const out: Buffer[] = []
  let i = 0
  for (const c of cuts) {
    if (i >= bytes.length) break
    out.push(scan.push(bytes.subarray(i, i + c)))
    i += c
  }
  if (i < bytes.length) out.push(scan.push(bytes.subarray(i)))
  const tail = scan.end()
  if (tail) out.push(tail)
  return Buffer.concat(out).toString()
}

describe('the streaming scan masks every spelling (fast-check)', () => {
  const text = fc.string({ unit: 'binary', maxLength: 40 })
  const secret = fc.string({ unit: fc.constantFrom(...'abcXYZ019-_./+=:"\\<>&%é€ ~'.split('')), minLength: 8, maxLength: 24 })
  for (const form of Object.keys(FORMS)) {
    it(`${form}: the secret at a random offset in random text, cut in random chunks, never reaches the client`, () => {
      fc.assert(
        fc.property(text, secret, text, fc.array(fc.integer({ min: 1, max: 9 }), { maxLength: 40 }), (before, value, after, cuts) => {
          const encoded = FORMS[form]!.encode(before + value + after)
          const s = new Scrubber([value])
          const out = scanInChunks(s, encoded, cuts)
          const c = core(form, before, value, after)
          if (c) expect(out).not.toContain(c)
          expect(s.count).toBeGreaterThan(0)
          // Any chunk split gives what one scan of the whole text gives.
          expect(out).toBe(scanInChunks(new Scrubber([value]), encoded, []))
          if (form === 'base64' || form === 'base64url') {
            // Every character holding any of the value's bits, and the padding after the last,
            // is under the one mask: the rest of the text is untouched.
            const p = Buffer.byteLength(before)
            const n = Buffer.byteLength(value)
            expect(out).toBe(`${encoded.slice(0, Math.floor((p * 8) / 6))}********${encoded.slice(Math.ceil(((p + n) * 8) / 6)).replace(/^=+/, '')}`)
          }
          // Read back the way the agent would: no trace of the secret.
          const decode = FORMS[form]!.decode
          if (decode) {
            let plain: string | undefined
            try {
              plain = decode(out)
            } catch {
              plain = undefined // the mask broke the encoding: nothing to read back
            }
            if (plain !== undefined) expect(plain).not.toContain(value)
          }
          if (form.includes(' in ')) {
            const inner = form === 'base64 in a URL' ? safeDecode(out) : out.replace(/\\\//g, '/').slice(1, -1)
            expect(Buffer.from(inner, 'base64').toString('latin1')).not.toContain(Buffer.from(value).toString('latin1'))
            const full = b64(Buffer.from(before + value + after))
            const p = Buffer.byteLength(before)
            expect(inner).not.toContain(full.slice(Math.ceil((p * 8) / 6), Math.floor(((p + Buffer.byteLength(value)) * 8) / 6)))
          }
        }),
        { numRuns: 150 },
      )
    })
  }

  it('a text without the secret goes through unchanged, whatever the chunks', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom(...'abcdef0123 {}":,'.split('')), maxLength: 200 }), fc.array(fc.integer({ min: 1, max: 9 }), { maxLength: 40 }), (body, cuts) => {
        const s = new Scrubber(['zz-Secret-Value-42'])
        expect(scanInChunks(s, body, cuts)).toBe(body)
        expect(s.count).toBe(0)
      }),
    )
  })

  it('the mask has one width: secrets of different lengths leave the same bytes', () => {
    const shortValue = 's3cr3t-short' // 12 bytes
    const longValue = `s3cr3t-${'l'.repeat(37)}` // 44 bytes: a partial base64 group and "=" padding
    const short = new Scrubber([shortValue])
    const long = new Scrubber([longValue])
    const a = scanInChunks(short, `{"token":"${shortValue}"}`, [3, 3, 3])
    const b = scanInChunks(long, `{"token":"${longValue}"}`, [5])
    expect(a).toBe(b)
    expect(a).toBe('{"token":"********"}')
    // In a header value too, and for a base64 spelling: its partial last character and the
    // padding go under the same mask, so not even the length modulo 3 shows.
    expect(short.maskString(`x ${b64(Buffer.from(shortValue))} y`)).toBe(long.maskString(`x ${b64(Buffer.from(longValue))} y`))
    expect(long.maskString(`x ${b64(Buffer.from(longValue))} y`)).toBe('x ******** y')
    expect(long.maskString(`x ${b64(Buffer.from(`ab${longValue}`))} y`)).toBe(`x ${b64(Buffer.from('ab')).slice(0, 2)}******** y`)
    expect(short.maskString(`x ${Buffer.from(shortValue).toString('hex')} y`)).toBe('x ******** y')
  })
})

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s)
  } catch {
    return s
  }
}

const CAPS = `
- name: apis
  type: http
  allow:
    - name: gh
      domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/gh/**"]
    - name: maps
      domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/maps/**"]
  transforms:
    - name: key-header
      applies_to: [gh]
      header: { name: x-api-key, action: set, value: 'secrets["api_key"]' }
    - name: gh-auth
      applies_to: [gh]
      auth: { credential: github-bot, provider: github }
    - name: maps-auth
      applies_to: [maps]
      auth: { credential: maps-key, provider: google-maps }
`

const SECRET = 'sk/"quoted"+plus=<tag>&amp'
const GH = 'ghp_tokenvalue4567890'
const MAPS = 'maps+key/with=chars?and&more'

/** Every spelling of each secret an echoing upstream below produces; none may reach the agent. */
function spellings(v: string): string[] {
  const bytes = Buffer.from(v)
  const out = [v, JSON.stringify(v).slice(1, -1), JSON.stringify(v).slice(1, -1).replace(/\//g, '\\/'), encodeURIComponent(v), new URLSearchParams({ q: v }).toString().slice(2), bytes.toString('hex')]
  for (let pad = 0; pad < 3; pad++) {
    const text = Buffer.concat([Buffer.alloc(pad, 0x41), bytes])
    for (const enc of [b64(text), b64url(text)]) out.push(enc.slice(Math.ceil((pad * 8) / 6), Math.floor(((pad + bytes.length) * 8) / 6)))
  }
  return out
}

describe('through the proxy: an upstream that echoes the injected values in other spellings', () => {
  let h: Harness
  let token = ''
  let before = 0
  let last: IncomingMessage | undefined
  const rows = async (n = 1): Promise<AuditEvent[]> => (await h.audit.waitForDecisions(before + n)).slice(before)
  const get = (target: string) =>
    connectRequest({ proxyPort: Number(new URL(h.proxyUrl).port), authority: `127.0.0.1:${h.up.httpsPort}`, token, caPem: h.proxy.ca.certPem, target })
  const leaks = (s: string): string[] => [SECRET, GH, MAPS].flatMap(spellings).filter((x) => s.includes(x))

  beforeAll(async () => {
    h = await startHarness()
    const admin = new OrgMaterialAdmin(h.store, new Sealer(await loadMasterKey(join(h.dir, 'data'))), h.audit, isStaticAuthProvider)
    const actor = { orgId: h.orgId, userId: h.userId }
    await admin.setSecret(actor, 'api_key', SECRET)
    await admin.createCredential(actor, { name: 'github-bot', provider: 'github', kind: 'static_token', token: GH })
    await admin.createCredential(actor, { name: 'maps-key', provider: 'google-maps', kind: 'query_key', token: MAPS })
    token = (await h.workspace(CAPS)).token
  })
  afterAll(async () => h.close())
  beforeEach(() => {
    before = h.audit.decisions().length
    last = undefined
  })

  /** The echo of each received value in every form, `pad` bytes into a base64 text so each alignment shows. */
  const echo = (values: string[]): string =>
    values.map((v, i) => {
      const bytes = Buffer.from(v)
      const lines = [JSON.stringify({ v }), JSON.stringify({ v }).replace(/\//g, '\\/'), `u=${encodeURIComponent(v)}`, `f=${new URLSearchParams({ q: v })}`, `hex=${bytes.toString('hex')}`]
      for (let pad = 0; pad < 3; pad++) {
        const text = Buffer.concat([Buffer.alloc(pad + i, 0x41), bytes, Buffer.from('!')])
        lines.push(`b64=${b64(text)}`, `b64url=${b64url(text)}`)
      }
      return lines.join('\n')
    }).join('\n')

  it('in the body, written a few bytes at a time: every spelling is masked, and the row counts them', async () => {
    h.up.handler.current = async (req, res) => {
      last = req
      const body = Buffer.from(echo([String(req.headers.authorization).slice(7), String(req.headers['x-api-key'])]))
      res.setHeader('content-type', 'text/plain')
      res.setHeader('content-length', body.length)
      for (let i = 0; i < body.length; i += 7) {
        res.write(body.subarray(i, i + 7))
        await new Promise((r) => setImmediate(r))
      }
      res.end()
    }
    const res = await get('/gh/echo')
    expect(res.status).toBe(200)
    expect(last!.headers.authorization).toBe(`Bearer ${GH}`)
    expect(last!.headers['x-api-key']).toBe(SECRET)
    expect(leaks(res.body)).toEqual([])
    expect(res.body).toContain('{"v":"********"}')
    expect(res.body).toContain('hex=********')
    // The declared length would tell the agent how long the secrets were: it is not passed on.
    expect(res.headers['content-length']).toBeUndefined()
    const [row] = await rows()
    expect((row!.detail as { scrubbed: number }).scrubbed).toBeGreaterThanOrEqual(2 * 11)
  })

  it('in response headers: JSON, percent, base64 and hex spellings of the header credential and the query key are masked', async () => {
    h.up.handler.current = (req, res) => {
      last = req
      const key = new URL(`http://x${req.url}`).searchParams.get('key')!
      res.setHeader('x-json', JSON.stringify({ key }))
      res.setHeader('location', `https://elsewhere.example/?k=${encodeURIComponent(key)}&b=${encodeURIComponent(b64(Buffer.from(`x${key}`)))}`)
      res.setHeader('x-b64', b64(Buffer.from(key)))
      res.setHeader('x-b64url', b64url(Buffer.from(`xy${key}`)))
      res.setHeader('x-hex', Buffer.from(key).toString('hex').toUpperCase())
      res.end('ok')
    }
    const res = await get('/maps/geo?q=1')
    expect(new URL(`http://x${last!.url}`).searchParams.get('key')).toBe(MAPS)
    expect(leaks(JSON.stringify(res.headers))).toEqual([])
    expect(leaks(decodeURIComponent(res.headers.location!))).toEqual([])
    expect(res.headers['x-hex']).toBe('********')
    expect(res.headers['x-json']).toBe('{"key":"********"}')
  })

  it('a body compressed by the upstream is decoded and every spelling masked', async () => {
    const { gzipSync } = await import('node:zlib')
    h.up.handler.current = (req, res) => {
      last = req
      res.setHeader('content-encoding', 'gzip')
      res.end(gzipSync(echo([String(req.headers.authorization).slice(7)])))
    }
    const res = await get('/gh/zip')
    expect(res.status).toBe(200)
    expect(leaks(res.body)).toEqual([])
    expect(res.body).toContain('b64=')
  })
})
