// The Scrubber's streaming scan against a reference: masking the whole body at once. Any split of
// the body into chunks must give the same bytes and the same count (fast-check).
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { Scrubber } from '../../src/proxy/scrub.js'

async function streamed(s: Scrubber, chunks: Buffer[]): Promise<Buffer> {
  const t = s.stream()
  const out: Buffer[] = []
  t.on('data', (d: Buffer) => out.push(d))
  const done = new Promise((r) => t.on('end', r))
  for (const c of chunks) t.write(Buffer.from(c))
  t.end()
  await done
  return Buffer.concat(out)
}

/** Reference: each run of bytes covered by occurrences (overlaps included) of needles becomes one fixed mask. */
function reference(needles: string[], body: string): string {
  const masked = new Array<boolean>(body.length).fill(false)
  for (const n of needles.filter(Boolean)) for (let i = body.indexOf(n); i >= 0; i = body.indexOf(n, i + 1)) masked.fill(true, i, i + n.length)
  return [...body].map((c, i) => (masked[i] ? (i > 0 && masked[i - 1] ? '' : '********') : c)).join('')
}

describe('Scrubber', () => {
  it('streaming over any chunk split equals masking the whole body', async () => {
    const alphabet = fc.constantFrom('a', 'b', 'c', 'ab', 'abc', 'x')
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(alphabet, { minLength: 1, maxLength: 4 }).map((x) => x.join('')), { minLength: 1, maxLength: 3 }),
        fc.array(alphabet, { maxLength: 40 }).map((x) => x.join('')),
        fc.array(fc.integer({ min: 1, max: 7 }), { maxLength: 20 }),
        async (needles, body, cuts) => {
          const chunks: Buffer[] = []
          let i = 0
          for (const c of cuts) {
            if (i >= body.length) break
            chunks.push(Buffer.from(body.slice(i, i + c)))
            i += c
          }
          if (i < body.length) chunks.push(Buffer.from(body.slice(i)))
          const out = await streamed(new Scrubber(needles), chunks)
          expect(out.toString()).toBe(reference(needles, body))
        },
      ),
      { numRuns: 500 },
    )
  })

  it('holds back only a tail that can still begin a needle', async () => {
    const s = new Scrubber(['secret'])
    expect(s.holdback(Buffer.from('data: x\n\n'))).toBe(0)
    expect(s.holdback(Buffer.from('token sec'))).toBe(3)
    const t = s.stream()
    const seen: string[] = []
    t.on('data', (d: Buffer) => seen.push(d.toString()))
    t.write(Buffer.from('event: a\n\n'))
    await new Promise((r) => setImmediate(r))
    expect(seen).toEqual(['event: a\n\n']) // an SSE event is not delayed
  })

  it('masks header values and drops a header whose name holds a needle', () => {
    const s = new Scrubber(['tok123'])
    expect(s.headers({ a: 'Bearer tok123', 'x-tok123': '1', b: ['tok123', 'ok'] })).toEqual({ a: 'Bearer ********', b: ['********', 'ok'] })
    expect(s.count).toBe(3)
  })
})

describe('what a secret-bearing transform hands the scrubber', () => {
  it('the secret always; the value built from it only when 8 characters or more', async () => {
    const { compilePolicy } = await import('../../src/policy/index.js')
    const doc = `
- name: api
  type: http
  allow:
    - {name: r, domains: [api.example.com], methods: [GET]}
  transforms:
    - header: {name: x-flag, action: set, value: 'secrets["k"] != "" ? "1" : "0"'}
    - header: {name: x-key, action: set, value: '"Token " + secrets["k"]'}
`
    const c = compilePolicy(doc)
    if (!c.ok) throw new Error(JSON.stringify(c.diagnostics))
    const admission = c.policy.admit({ method: 'GET', scheme: 'https', host: 'api.example.com', path: '/', rawQuery: '', headers: {} }, {})
    if (admission.decision !== 'allow') throw new Error('not allowed')
    const out = c.policy.applyTransforms({ match: admission.match, request: { method: 'GET', scheme: 'https', host: 'api.example.com', path: '/', rawQuery: '', headers: {} }, context: {}, secrets: () => 'ab' })
    expect(out.headers['x-flag']).toEqual(['1'])
    expect(new Set(out.injected)).toEqual(new Set(['ab', 'Token ab', 'Token%20ab']))
    const withheld = c.policy.applyTransforms({ match: admission.match, request: { method: 'GET', scheme: 'https', host: 'api.example.com', path: '/', rawQuery: '', headers: {} }, context: {}, secrets: () => 'ab', secretsAllowed: false })
    expect(withheld.headers['x-key']).toBeUndefined()
    expect(withheld.failed).toEqual({ 'transform[0]': 'auth_unavailable', 'transform[1]': 'auth_unavailable' })
    expect(withheld.injected).toEqual([])
  })
})
