// caps.yaml text → CompileResult. Parse with positions, run every check (all errors of a file in
// one pass), and construct a frozen CompiledPolicy only when no error was found. Any input gets
// diagnostics: oversized, binary, deeply nested or alias-bomb documents included.

import { createHash } from 'node:crypto'
import { checkDocument } from './rules/capability.js'
import { checkMcpShadowing } from './rules/mcp.js'
import { Policy } from './policy.js'
import type { CompileOptions, CompileResult, Diagnostic } from './types.js'
import { CEL_POLICY_COST_LIMIT } from './cel-cost.js'
import { MAX_SOURCE_BYTES, parseYaml, type Reader } from './yaml-reader.js'

function sortDiagnostics(ds: Diagnostic[]): Diagnostic[] {
  const seen = new Set<string>()
  return ds
    .filter((d) => {
      const k = `${d.code}|${d.path}|${d.line}|${d.column}|${d.message}`
      return seen.has(k) ? false : (seen.add(k), true)
    })
    .sort((a, b) => a.line - b.line || a.column - b.column || a.code.localeCompare(b.code))
}

function fail(code: 'document_too_large' | 'document_too_complex', message: string): CompileResult {
  return { ok: false, diagnostics: [{ severity: 'error', code, message, path: '', line: 1, column: 1, rule: code }] }
}

// One request can evaluate many expressions in one budget scope (every admission rule of a host,
// say); their bounds together must fit, or an accepted policy could be cut at run time.
function checkPolicyCost(reader: Reader): void {
  let total = 0
  let worst: Reader['celCosts'][number] | undefined
  for (const c of reader.celCosts) {
    total += c.cost
    if (!worst || c.cost > worst.cost) worst = c
  }
  if (worst && total > CEL_POLICY_COST_LIMIT) {
    const n = (x: number) => Math.ceil(x).toLocaleString('en-US')
    reader.error(
      'cel_cost_exceeded',
      `the policy's ${reader.celCosts.length} expressions may cost ${n(total)} units together, over the limit of ${n(CEL_POLICY_COST_LIMIT)}; this one is the costliest (${n(worst.cost)})`,
      worst.path,
      worst.node,
    )
  }
}

export function compilePolicy(source: string, _opts: CompileOptions = {}): CompileResult {
  if (Buffer.byteLength(source, 'utf8') > MAX_SOURCE_BYTES) return fail('document_too_large', `the document is larger than ${MAX_SOURCE_BYTES} bytes`)
  try {
    const { reader, root } = parseYaml(source)
    if (reader.hasErrors) return { ok: false, diagnostics: sortDiagnostics(reader.diagnostics) }
    const caps = checkDocument(reader, root)
    checkMcpShadowing(reader, caps)
    checkPolicyCost(reader)
    if (reader.overBudget) {
      reader.error('document_too_complex', 'the document expands too many aliases (possible YAML bomb)', '', null)
    }
    const diagnostics = sortDiagnostics(reader.diagnostics)
    if (reader.hasErrors) return { ok: false, diagnostics }
    const hash = createHash('sha256').update(source).digest('hex')
    return { ok: true, policy: new Policy(hash, caps), diagnostics }
  } catch (e) {
    // The yaml parser and the checks recurse over the document; pathological nesting may exhaust
    // the stack. That is a property of the input, reported as such.
    if (e instanceof RangeError) return fail('document_too_complex', 'the document is nested too deeply')
    throw e
  }
}

const CACHE_MAX = 256
const cache = new Map<string, CompileResult>()

/** compilePolicy, memoized by the sha256 of the source text (bounded, least recently used evicted). */
export function compilePolicyCached(source: string): CompileResult {
  const key = createHash('sha256').update(source).digest('hex')
  const hit = cache.get(key)
  if (hit) {
    cache.delete(key)
    cache.set(key, hit)
    return hit
  }
  const res = compilePolicy(source)
  if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value as string)
  cache.set(key, res)
  return res
}
