// `matches()` on RE2 (linear time) instead of the engine's backtracking RegExp. Every
// `x.matches(p)` is renamed at save: to `re2Matches` when `p` is a literal (compiled and checked at
// save), to `re2MatchesDynamic` when the pattern is built at run time. RE2 matches in linear time
// but compiles in time that grows with the pattern (a 64 KiB pattern took ~50 ms, 1 MiB over a
// second before failing), so a pattern from the request is refused past RE2_DYNAMIC_MAX.

import RE2 from 're2'

/** Longest pattern built at run time (from request data) that is compiled. */
export const RE2_DYNAMIC_MAX = 1024

// Patterns compiled once; dynamic (non-literal) patterns are cached with a bound so a hostile
// policy cannot grow memory without limit.
const regexCache = new Map<string, RE2>()
const REGEX_CACHE_MAX = 1000
function re2For(pattern: string): RE2 {
  let re = regexCache.get(pattern)
  if (!re) {
    re = new RE2(pattern, 'u')
    if (regexCache.size >= REGEX_CACHE_MAX) regexCache.delete(regexCache.keys().next().value as string)
    regexCache.set(pattern, re)
  }
  return re
}

/** Validates a regular expression with RE2; returns an error message or undefined. */
export function re2Error(pattern: string): string | undefined {
  try {
    re2For(pattern)
    return undefined
  } catch (e) {
    return (e as Error).message
  }
}

/** `string.<name>(string): bool`, in the shape the engine's registerFunction takes. */
const receiverFn = (name: string, handler: (s: string, p: string) => boolean) => ({
  name,
  receiverType: 'string',
  returnType: 'bool',
  params: [{ name: 'pattern', type: 'string' }],
  handler,
})

export const RE2_LITERAL = receiverFn('re2Matches', (s, p) => re2For(p).test(s))

export const RE2_DYNAMIC = receiverFn('re2MatchesDynamic', (s, p) => {
  if (p.length > RE2_DYNAMIC_MAX) throw new Error(`matches(): a pattern built at run time is longer than ${RE2_DYNAMIC_MAX} characters`)
  return re2For(p).test(s)
})

interface Ranged {
  range: { start: number; end: number }
  op: string
  args: unknown
}

/**
 * Renames the method of every `x.matches(p)` call, in place. AST ranges leave out parentheses, so
 * slicing sub-expressions is unreliable; renaming one identifier is not: the name sits between the
 * receiver's end and the argument's start. The caller re-parses the result and checks that no
 * `matches` call is left.
 */
export function rewriteMatches(source: string, calls: { subject: Ranged; pattern: Ranged }[]): string | undefined {
  const edits: { at: number; name: string }[] = []
  for (const c of calls) {
    const at = source.lastIndexOf('matches', c.pattern.range.start)
    if (at < c.subject.range.end) return undefined
    const literal = c.pattern.op === 'value' && typeof c.pattern.args === 'string'
    edits.push({ at, name: literal ? RE2_LITERAL.name : RE2_DYNAMIC.name })
  }
  let out = source
  for (const { at, name } of edits.sort((a, b) => b.at - a.at)) out = out.slice(0, at) + name + out.slice(at + 'matches'.length)
  return out
}
