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

/** Reference: every byte covered by an occurrence (overlaps included) of a needle becomes "*". */
function reference(needles: string[], body: string): string {
  const masked = new Array<boolean>(body.length).fill(false)
  for (const n of needles.filter(Boolean)) for (let i = body.indexOf(n); i >= 0; i = body.indexOf(n, i + 1)) masked.fill(true, i, i + n.length)
  return [...body].map((c, i) => (masked[i] ? '*' : c)).join('')
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
    expect(s.headers({ a: 'Bearer tok123', 'x-tok123': '1', b: ['tok123', 'ok'] })).toEqual({ a: 'Bearer ******', b: ['******', 'ok'] })
    expect(s.count).toBe(3)
  })
})
