// Domain and path globs (semantics documented in docs/policy.md), compiled once into matchers.
// Exact patterns skip regex entirely. A glob with at most one `*` per segment (label) and at most
// one `**` compiles to a JS RegExp that cannot backtrack more than linearly; anything with more
// wildcards (e.g. `/a*b*c*`, which would backtrack polynomially on a long agent-chosen path) is
// run on RE2 instead.

import RE2 from 're2'

export type Matcher = (value: string) => boolean

function matcherFor(source: string, parts: string[]): Matcher {
  const manyStars = parts.some((p) => p !== '**' && (p.match(/\*/g)?.length ?? 0) > 1) || parts.filter((p) => p === '**').length > 1
  const rx: { test(s: string): boolean } = manyStars ? new RE2(source, 'u') : new RegExp(source)
  return (value) => rx.test(value)
}

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

/** Lowercases, strips one trailing dot and drops the scheme's default port. */
export function normalizeHost(host: string, scheme: 'http' | 'https' = 'https'): string {
  // Fast path for the common case: already lowercase, no port, no trailing dot, no spaces.
  if (/^[a-z0-9.-]*[a-z0-9-]$/.test(host)) return host
  // And with a port that is not the scheme's default (`127.0.0.1:8443`): unchanged as well.
  if (/^[a-z0-9.-]*[a-z0-9-]:[0-9]+$/.test(host) && !host.endsWith(scheme === 'https' ? ':443' : ':80')) return host
  const { name, port } = splitPort(host.trim().toLowerCase())
  const h = name.endsWith('.') ? name.slice(0, -1) : name
  const p = (scheme === 'https' && port === '443') || (scheme === 'http' && port === '80') ? '' : port
  return p ? `${h}:${p}` : h
}

/** Splits `name:port` with string operations only (the host is agent-controlled; no regex backtracking). */
function splitPort(h: string): { name: string; port: string } {
  const i = h.lastIndexOf(':')
  if (i < 0 || h.endsWith(']')) return { name: h, port: '' }
  const port = h.slice(i + 1)
  for (let k = 0; k < port.length; k++) {
    const c = port.charCodeAt(k)
    if (c < 48 || c > 57) return { name: h, port: '' }
  }
  return port === '' ? { name: h, port: '' } : { name: h.slice(0, i), port }
}

/**
 * Normalizes a domain pattern: lowercase, no trailing dot, no default port (443 and 80 are both
 * dropped from patterns: a pattern does not know the scheme, and either default is the default).
 */
export function normalizeDomainPattern(pattern: string): string {
  const split = splitPort(pattern.trim().toLowerCase())
  let p = split.name
  let port = split.port
  if (p.endsWith('.')) p = p.slice(0, -1)
  if (port === '443' || port === '80') port = ''
  return port ? `${p}:${port}` : p
}

const LABEL = /^(?:\*\*|[a-z0-9_*-]+)$/

/** Returns an error message for an invalid (normalized) domain pattern. */
export function domainPatternError(p: string): string | undefined {
  if (p === '') return 'domain pattern is empty'
  const [host, port, ...rest] = p.split(':')
  if (rest.length > 0 || (port !== undefined && !/^\d{1,5}$/.test(port)) || (port !== undefined && Number(port) > 65535)) return `"${p}" has an invalid port`
  if (host.length > 253) return `"${p}" is longer than 253 characters`
  const labels = host.split('.')
  for (const l of labels) {
    if (!LABEL.test(l)) return `"${p}" is not a hostname pattern (letters, digits, "-", "_", "*" and "**" labels only; no scheme, path or spaces)`
    if (l.includes('**') && l !== '**') return `"${p}": "**" must be a whole label`
  }
  return undefined
}

// Matchers are pure, so equal patterns share one (policies repeat domains and paths, and a
// recompiled document reuses the previous matchers). Bounded like the other compile caches.
const matcherCache = new Map<string, Matcher>()
const MATCHER_CACHE_MAX = 10_000
function cachedMatcher(key: string, build: () => Matcher): Matcher {
  let m = matcherCache.get(key)
  if (!m) {
    m = build()
    if (matcherCache.size >= MATCHER_CACHE_MAX) matcherCache.delete(matcherCache.keys().next().value as string)
    matcherCache.set(key, m)
  }
  return m
}

export function compileDomain(p: string): Matcher {
  if (!p.includes('*')) return (host) => host === p
  return cachedMatcher(`d:${p}`, () => buildDomainMatcher(p))
}

function buildDomainMatcher(p: string): Matcher {
  const [host, port] = p.split(':')
  const labels = host.split('.')
  let re = ''
  labels.forEach((l, i) => {
    const last = i === labels.length - 1
    if (l === '**') re += last ? '(?:[^.:]+\\.)*[^.:]+' : '(?:[^.:]+\\.)+'
    else {
      const body = l === '*' ? '[^.:]+' : l.split('*').map(escapeRegex).join('[^.:]*')
      re += body + (last ? '' : '\\.')
    }
  })
  return matcherFor(`^${re}${port ? `:${port}` : ''}$`, labels)
}

export function pathPatternError(p: string): string | undefined {
  if (!p.startsWith('/')) return `path pattern "${p}" must start with "/"`
  if (/[\s?#]/.test(p)) return `path pattern "${p}" may not contain whitespace, "?" or "#"`
  for (const seg of p.split('/')) if (seg.includes('**') && seg !== '**') return `path pattern "${p}": "**" must be a whole segment`
  return undefined
}

export function compilePath(p: string): Matcher {
  if (!p.includes('*')) return (path) => path === p
  return cachedMatcher(`p:${p}`, () => buildPathMatcher(p))
}

function buildPathMatcher(p: string): Matcher {
  // A trailing "/**" also matches the prefix itself: "/v1/**" admits "/v1" and "/v1/".
  const segs = p.split('/')
  let re = ''
  for (let i = 1; i < segs.length; i++) {
    const s = segs[i]
    const last = i === segs.length - 1
    if (s === '**') re += last ? '(?:/.*)?' : '(?:/[^/]*)*'
    else re += '/' + (s === '*' ? '[^/]*' : s.split('*').map(escapeRegex).join('[^/]*'))
  }
  return matcherFor(`^${re}$`, segs)
}

/**
 * Finds the rules whose domain patterns can match a host without testing every rule: exact
 * patterns by host, wildcard patterns by the literal labels after their last wildcard label, and
 * the rare patterns whose last label holds a wildcard in a short list tried for every host.
 * Items are rule positions in document order; lookups return them sorted and are memoized per
 * host (bounded), so admission touches only the few rules that name the host.
 */
export class DomainIndex {
  readonly #exact = new Map<string, number[]>()
  readonly #suffix = new Map<string, number[]>()
  readonly #rest: number[] = []
  readonly #memo = new Map<string, readonly number[]>()
  static readonly MEMO_MAX = 4096

  add(pattern: string, item: number): void {
    const push = (m: Map<string, number[]>, k: string) => {
      const l = m.get(k)
      if (!l) m.set(k, [item])
      else if (l[l.length - 1] !== item) l.push(item)
    }
    if (!pattern.includes('*')) return push(this.#exact, pattern)
    const [host, port] = pattern.split(':')
    const labels = host.split('.')
    let k = labels.length - 1
    while (k >= 0 && !labels[k].includes('*')) k--
    if (k === labels.length - 1) {
      if (this.#rest[this.#rest.length - 1] !== item) this.#rest.push(item)
      return
    }
    push(this.#suffix, labels.slice(k + 1).join('.') + (port ? `:${port}` : ''))
  }

  lookup(host: string): readonly number[] {
    const hit = this.#memo.get(host)
    if (hit) return hit
    const found = new Set<number>(this.#exact.get(host))
    const colon = host.lastIndexOf(':')
    const name = colon >= 0 && !host.endsWith(']') ? host.slice(0, colon) : host
    const port = colon >= 0 && !host.endsWith(']') ? host.slice(colon) : ''
    const labels = name.split('.')
    for (let i = 1; i < labels.length; i++) for (const x of this.#suffix.get(labels.slice(i).join('.') + port) ?? []) found.add(x)
    for (const x of this.#rest) found.add(x)
    const out = Object.freeze([...found].sort((a, b) => a - b))
    if (this.#memo.size >= DomainIndex.MEMO_MAX) this.#memo.delete(this.#memo.keys().next().value as string)
    this.#memo.set(host, out)
    return out
  }
}
