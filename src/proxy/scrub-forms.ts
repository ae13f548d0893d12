// The spellings of one injected value that the scrubber looks for (scrub.ts): the value itself,
// its base64, base64url and hex encodings, and each of those once more JSON-escaped or
// percent-encoded the ways common encoders write them. An upstream that echoes a credential rarely
// echoes it verbatim: a JSON API escapes it, a redirect percent-encodes it, a debug endpoint
// base64s the header it received. Deeper nesting (base64 of base64, JSON of a percent-encoded
// form) and line-wrapped base64 are not covered (docs/security.md "Credentials never come back").

/**
 * Shortest base64 or hex spelling looked for: shorter ones would mask ordinary text. The value
 * itself and its escaped forms are looked for at any length.
 */
const MIN_ENCODED_CHARS = 8

/**
 * One spelling to mask. A bare base64 (or base64url) spelling has `edges`: the character just
 * before it (`before`) or just after it (`after`) mixes the value's first or last bits with a
 * neighbouring byte's, and is masked with it when it is a base64 character (after it, the `=`
 * padding too), so the agent learns neither those bits nor the value's length modulo 3.
 */
export interface Spelling {
  text: string
  edges?: { before: boolean; after: boolean }
}

/**
 * Every distinct spelling of `value` to mask (the value first). Derived once per value and kept
 * for the next responses (a bounded cache: the same credentials recur request after request).
 */
export function encodedForms(value: string): readonly Spelling[] {
  let forms = cache.get(value)
  if (!forms) {
    forms = derive(value)
    if (cache.size >= CACHE_MAX) cache.clear()
    cache.set(value, forms)
  }
  return forms
}

const CACHE_MAX = 1024
const cache = new Map<string, readonly Spelling[]>()

function derive(value: string): Spelling[] {
  const out = new Map<string, Spelling>()
  const add = (text: string, edges?: Spelling['edges']): void => {
    if (text === '' || out.has(text)) return
    out.set(text, edges ? { text, edges } : { text })
  }
  const withEscapes = (s: string, edges?: Spelling['edges']): void => {
    add(s, edges)
    for (const w of escapes(s)) add(w)
  }
  withEscapes(value)
  const bytes = Buffer.from(value, 'utf8')
  for (let offset = 0; offset < 3; offset++) {
    const b64 = base64Core(bytes, offset)
    if (b64.length < MIN_ENCODED_CHARS) continue
    const edges = { before: offset !== 0, after: ((offset + bytes.length) * 8) % 6 !== 0 }
    withEscapes(b64, edges)
    withEscapes(b64.replace(/\+/g, '-').replace(/\//g, '_'), edges)
  }
  const hex = bytes.toString('hex')
  if (hex.length >= MIN_ENCODED_CHARS) {
    add(hex)
    add(hex.toUpperCase())
  }
  return [...out.values()]
}

/**
 * The base64 characters fixed by `bytes` alone when they start `offset` bytes (0, 1 or 2) into
 * a 3-byte group of a longer text: a character that also holds bits of a neighbouring byte
 * depends on that byte, so it is left out at both ends. The three offsets cover every position
 * the value can have in an encoded text.
 */
export function base64Core(bytes: Buffer, offset: number): string {
  const full = Buffer.concat([Buffer.alloc(offset), bytes]).toString('base64').replace(/=+$/, '')
  return full.slice(Math.ceil((offset * 8) / 6), Math.floor(((offset + bytes.length) * 8) / 6))
}

/** JSON-escaped and percent-encoded spellings of `s` (only the ones that differ from `s` matter). */
function escapes(s: string): string[] {
  // No encoder below changes these characters (most tokens are made of them alone).
  if (/^[A-Za-z0-9_.-]*$/.test(s)) return []
  const json = JSON.stringify(s).slice(1, -1)
  const out: string[] = []
  for (const hexCase of [lower, upper]) {
    // Plain JSON.stringify; Python's ensure_ascii; Go's HTML-safe set; .NET's default encoder set.
    for (const set of [NONE, NON_ASCII, GO_HTML, DOTNET]) {
      const escaped = uEscape(json, set, hexCase)
      out.push(escaped, escaped.replace(/\//g, '\\/')) // PHP and some others also write "\/"
    }
  }
  for (const encode of [encodeURIComponent, encodeURI, formEncode]) {
    try {
      const p = encode(s)
      out.push(p, p.replace(/%[0-9A-F]{2}/g, lower))
    } catch {
      // A lone surrogate has no UTF-8 form: nothing percent-encoded can spell it.
    }
  }
  return out
}

const lower = (h: string): string => h.toLowerCase()
const upper = (h: string): string => h.toUpperCase()
const NONE = /(?!)/g
const NON_ASCII = /[\u007f-\uffff]/g
const GO_HTML = /[<>&\u2028\u2029]/g
const DOTNET = /[<>&'"+`\u007f-\uffff]/g

/** `json` with the characters in `set` written as `\uXXXX` (an already escaped `\"` becomes `\u0022`). */
function uEscape(json: string, set: RegExp, hexCase: (h: string) => string): string {
  const u = (c: string): string => `\\u${hexCase(c.charCodeAt(0).toString(16).padStart(4, '0'))}`
  set.lastIndex = 0
  if (set === NONE || !set.test(json)) return json
  return json.replace(/\\"|[^\\]|\\./g, (m) => {
    const c = m === '\\"' ? '"' : m
    set.lastIndex = 0
    return c.length === 1 && set.test(c) ? u(c) : m
  })
}

/** application/x-www-form-urlencoded (URLSearchParams): space as "+", more characters encoded. */
function formEncode(s: string): string {
  return new URLSearchParams({ k: s }).toString().slice(2)
}
