// Generated-input tests (fast-check) of the path normalizer and the destination matcher, each
// against a reference model written independently of the code under test.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { compileDomain, normalizeDomainPattern, normalizeHost } from '../../src/policy/glob.js'
import { canonicalPath } from '../../src/policy/path.js'

// Pieces an attacker combines: dots, slashes, escapes of dots/slashes/backslashes, parameters.
const PIECES = ['a', 'b', '.', '..', '/', '//', '%2e', '%2E', '%2f', '%5c', '\\', ';', '%41', '%7e', '%3a', '%3A', '~', '%', '%g1', '%00', '#']
const rawPath = fc.array(fc.constantFrom(...PIECES), { maxLength: 12 }).map((xs) => '/' + xs.join(''))

/** Reference: the path a WHATWG (browser-grade) URL parser serves for a target. */
const whatwg = (p: string): string => new URL(`http://h${p}`).pathname

describe('canonicalPath (property)', () => {
  it('an accepted path is a fixed point: normalizing again, or resolving it the WHATWG way, changes nothing', () => {
    fc.assert(
      fc.property(rawPath, (p) => {
        const r = canonicalPath(p)
        if (!r.ok) return
        expect(canonicalPath(r.path)).toEqual({ ok: true, path: r.path })
        expect(whatwg(r.path)).toBe(r.path)
        expect(r.path).not.toMatch(/\/\/|\/\.\.?(\/|$)|%2F|%5C|\\|%00|#/i)
      }),
      { numRuns: 3000 },
    )
  })

  it('matches a reference model on plain segments (a, b, ., .., empty): RFC 3986 removal, merged slashes, refusal above /', () => {
    const seg = fc.constantFrom('a', 'b', '.', '..', '')
    fc.assert(
      fc.property(fc.array(seg, { maxLength: 10 }), (segs) => {
        const p = '/' + segs.join('/')
        // Model: walk the non-empty segments with a stack; ".." on an empty stack is a refusal.
        const stack: string[] = []
        let climbed = false
        for (const s of segs) {
          if (s === '' || s === '.') continue
          if (s === '..') {
            if (stack.length === 0) climbed = true
            stack.pop()
          } else stack.push(s)
        }
        const lastSeg = segs[segs.length - 1]
        const trailing = segs.length > 0 && (lastSeg === '' || lastSeg === '.' || lastSeg === '..') && stack.length > 0
        const r = canonicalPath(p)
        if (climbed) expect(r.ok).toBe(false)
        else expect(r).toEqual({ ok: true, path: '/' + stack.join('/') + (trailing ? '/' : '') })
      }),
      { numRuns: 3000 },
    )
  })

  it('decodes exactly the unreserved escapes and uppercases the others', () => {
    const ch = fc.integer({ min: 0x21, max: 0x7e }).filter((c) => c !== 0x2f && c !== 0x5c && c !== 0x2e)
    fc.assert(
      fc.property(fc.array(ch, { minLength: 1, maxLength: 8 }), (codes) => {
        const p = '/x' + codes.map((c) => '%' + c.toString(16).padStart(2, '0').toLowerCase()).join('')
        const expected = '/x' + codes.map((c) => (/[A-Za-z0-9\-_~]/.test(String.fromCharCode(c)) ? String.fromCharCode(c) : '%' + c.toString(16).toUpperCase().padStart(2, '0'))).join('')
        expect(canonicalPath(p)).toEqual({ ok: true, path: expected })
      }),
    )
  })
})

// Destination matcher: pattern labels and host labels from small alphabets so matches are common.
const label = fc.constantFrom('a', 'b', 'x', 'xa', 'ax')
const patLabel = fc.constantFrom('a', 'b', 'x', '*', 'x*', '*a', '**')
const port = fc.constantFrom(undefined, 80, 443, 8443)

/** Reference: labels matched recursively; `**` takes one or more labels, `*` one, `x*` a prefix. */
function labelsMatch(pat: string[], host: string[]): boolean {
  if (pat.length === 0) return host.length === 0
  const [p, ...rest] = pat as [string, ...string[]]
  if (p === '**') {
    for (let k = 1; k <= host.length; k++) if (labelsMatch(rest, host.slice(k))) return true
    return false
  }
  if (host.length === 0) return false
  const h = host[0]!
  const ok = p.includes('*') ? new RegExp('^' + p.split('*').join('.*') + '$').test(h) && h.length > 0 : p === h
  return ok && labelsMatch(rest, host.slice(1))
}

describe('domain matcher (property)', () => {
  it('agrees with the reference: labels by glob, and the port exactly (absent = the scheme default)', () => {
    fc.assert(
      fc.property(
        fc.array(patLabel, { minLength: 1, maxLength: 4 }), port,
        fc.array(label, { minLength: 1, maxLength: 5 }), port,
        fc.constantFrom('http' as const, 'https' as const),
        (pl, pp, hl, hp, scheme) => {
          if (pl.filter((x) => x === '**').length > 1) return
          const pattern = pl.join('.') + (pp ? `:${pp}` : '')
          const host = hl.join('.') + (hp ? `:${hp}` : '')
          const def = scheme === 'https' ? 443 : 80
          // A pattern's 80 or 443 means "the default port"; a request's default port is no port.
          const patPort = pp === 80 || pp === 443 || pp === undefined ? def : pp
          const hostPort = hp ?? def
          const expected = labelsMatch(pl, hl) && patPort === hostPort
          expect(compileDomain(normalizeDomainPattern(pattern))(normalizeHost(host, scheme)), `${pattern} vs ${scheme}://${host}`).toBe(expected)
        },
      ),
      { numRuns: 3000 },
    )
  })
})
