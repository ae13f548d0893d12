// One canonical path (docs/policy.md "Paths"): the request path is normalized once, before any
// glob or CEL sees it, and that normalized path is what the proxy forwards. An upstream therefore
// never receives dot segments, duplicate slashes or encodings it could resolve differently from
// the policy. Paths whose meaning depends on the server (an encoded "/", a backslash, an encoded or
// parameter-decorated dot segment, invalid escapes) are refused as ambiguous instead of guessed.

export type PathResult = { ok: true; path: string } | { ok: false; message: string }

const HEX = '0123456789ABCDEF'

function hexVal(c: number): number {
  if (c >= 48 && c <= 57) return c - 48
  if (c >= 65 && c <= 70) return c - 55
  if (c >= 97 && c <= 102) return c - 87
  return -1
}

/** RFC 3986 unreserved: ALPHA / DIGIT / "-" / "." / "_" / "~". */
function unreserved(c: number): boolean {
  return (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 45 || c === 46 || c === 95 || c === 126
}

const bad = (message: string): PathResult => ({ ok: false, message })

/**
 * Normalizes one segment: escapes of unreserved characters decoded, other escapes uppercased.
 * Returns the segment, or a refusal. `decodedDot` is set when an escape produced a ".".
 */
function segment(raw: string): { seg: string; encodedDot: boolean; decoded: string } | string {
  let out = ''
  let decoded = ''
  let encodedDot = false
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i)
    if (c === 37) {
      const h = hexVal(raw.charCodeAt(i + 1))
      const l = hexVal(raw.charCodeAt(i + 2))
      if (h < 0 || l < 0) return 'invalid percent-encoding'
      const b = h * 16 + l
      i += 2
      if (b === 0x2f) return 'an encoded "/" (%2F)'
      if (b === 0x5c) return 'an encoded "\\" (%5C)'
      if (b === 0) return 'an encoded NUL (%00)'
      if (unreserved(b)) {
        if (b === 46) encodedDot = true
        out += String.fromCharCode(b)
      } else out += '%' + HEX[h] + HEX[l]
      decoded += String.fromCharCode(b)
      continue
    }
    // Printable ASCII only: a server may read raw bytes beyond it in any charset.
    if (c <= 0x20 || c >= 0x7f) return 'a character that must be percent-encoded'
    if (c === 92) return 'a "\\"'
    if (c === 35) return 'a "#"'
    out += raw[i]
    decoded += raw[i]
  }
  return { seg: out, encodedDot, decoded }
}

/**
 * The canonical form of a request path (without its query): must start with "/"; escapes of
 * unreserved characters decoded and the others uppercased (RFC 3986 §6.2.2.1–2); runs of "/"
 * merged into one; "." and ".." segments removed (RFC 3986 §5.2.4). Refused as ambiguous: "\",
 * "%2F", "%5C", "%00", "#", raw non-printable or non-ASCII bytes, invalid escapes, a ".." that would
 * climb above "/", and segments that are dot segments only to some servers (written with escapes
 * like "%2e%2e", or followed by ";params" like "..;").
 */
export function canonicalPath(raw: string): PathResult {
  if (!raw.startsWith('/')) return bad('the path must start with "/"')
  if (alreadyCanonical(raw)) return { ok: true, path: raw }
  const out: string[] = []
  const parts = raw.split('/')
  // parts[0] is "" (the leading slash); an empty part elsewhere is a duplicate or trailing slash.
  let trailing = false
  for (let k = 1; k < parts.length; k++) {
    const p = parts[k]!
    const last = k === parts.length - 1
    if (p === '') {
      trailing = last
      continue
    }
    const s = segment(p)
    if (typeof s === 'string') return bad(`the path holds ${s}`)
    const base = s.decoded.split(';')[0]!
    const dotLike = base === '.' || base === '..'
    if (dotLike && s.decoded !== base) return bad(`the segment "${p}" is a dot segment with parameters`)
    if (dotLike && s.encodedDot) return bad(`the segment "${p}" is an encoded dot segment`)
    if (s.seg === '.') {
      trailing = last
      continue
    }
    if (s.seg === '..') {
      if (out.length === 0) return bad('the path climbs above "/"')
      out.pop()
      trailing = last
      continue
    }
    out.push(s.seg)
    trailing = false
  }
  const path = '/' + out.join('/') + (trailing && out.length > 0 ? '/' : '')
  return { ok: true, path }
}

/**
 * The common case, without splitting: printable ASCII with no escape, backslash or "#", no empty
 * segment but a trailing one, and no segment starting with "." (so no dot segment). Such a path
 * is its own canonical form.
 */
function alreadyCanonical(raw: string): boolean {
  let prev = 0
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i)
    if (c <= 0x20 || c >= 0x7f || c === 37 || c === 92 || c === 35) return false
    if (prev === 47 && (c === 47 || c === 46)) return false
    prev = c
  }
  return true
}

/** The path of a request target (origin-form or absolute-form), as written: no decoding, no query. */
export function targetPath(target: string): string {
  let t = target
  const scheme = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\//.exec(t)
  if (scheme) {
    const rest = t.slice(scheme[0].length)
    const slash = rest.search(/[/?#]/)
    t = slash < 0 ? '/' : rest[slash] === '/' ? rest.slice(slash) : '/' + rest.slice(slash)
  }
  const q = t.indexOf('?')
  return q < 0 ? t : t.slice(0, q)
}
