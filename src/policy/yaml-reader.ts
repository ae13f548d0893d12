// Reads caps.yaml with positions kept: every value we look at is a `yaml` node with a source
// range, so every diagnostic can name its JSON Pointer, line and column. Aliases are resolved
// against a node budget so a YAML bomb yields a diagnostic instead of a hang.

import { isAlias, isMap, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node, type Pair, type YAMLMap, type YAMLSeq } from 'yaml'
import type { Diagnostic, Severity } from './types.js'
import type { Code } from './codes.js'

export const MAX_SOURCE_BYTES = 1024 * 1024
const MAX_RESOLVED_NODES = 200_000

export class Reader {
  readonly diagnostics: Diagnostic[] = []
  /** Every compiled CEL expression's cost bound, where it sits (the policy-wide cost limit). */
  readonly celCosts: { cost: number; path: string; node: Node | null | undefined }[] = []
  #visited = 0
  #overBudget = false

  constructor(
    readonly doc: Document,
    readonly lines: LineCounter,
  ) {}

  position(node: Node | null | undefined): { line: number; column: number } {
    const offset = node?.range?.[0]
    if (offset === undefined) return { line: 1, column: 1 }
    const { line, col } = this.lines.linePos(offset)
    return { line, column: col }
  }

  report(severity: Severity, code: Code, message: string, path: string, node: Node | null | undefined): void {
    const { line, column } = this.position(node)
    this.diagnostics.push({ severity, code, message, path, line, column, rule: code })
  }

  error(code: Code, message: string, path: string, node: Node | null | undefined): void {
    this.report('error', code, message, path, node)
  }

  warn(code: Code, message: string, path: string, node: Node | null | undefined): void {
    this.report('warning', code, message, path, node)
  }

  get hasErrors(): boolean {
    return this.diagnostics.some((d) => d.severity === 'error')
  }

  /** Follows aliases, counting resolutions so a billion-laughs document stops early. */
  resolve(node: unknown): Node | null {
    let n = node as Node | null
    let hops = 0
    while (n && isAlias(n)) {
      if (++this.#visited > MAX_RESOLVED_NODES || ++hops > 100) {
        this.#overBudget = true
        return null
      }
      n = (n.resolve(this.doc) as Node | undefined) ?? null
    }
    if (n && ++this.#visited > MAX_RESOLVED_NODES) {
      this.#overBudget = true
      return null
    }
    return n
  }

  get overBudget(): boolean {
    return this.#overBudget
  }
}

export function pointer(base: string, token: string | number): string {
  const t = String(token)
  // Most keys need no escaping; skipping the two regex passes matters on large documents.
  if (!t.includes('~') && !t.includes('/')) return `${base}/${t}`
  return `${base}/${t.replace(/~/g, '~0').replace(/\//g, '~1')}`
}

export type Parsed = { reader: Reader; root: Node | null }

// yaml's Parser reads process.env.LOG_TOKENS for every token (its Composer reads LOG_STREAM per
// document). On Node each process.env read is a call into C++, which made up about a sixth of
// the parse of a 200-capability policy. The parse is synchronous, so while it runs a plain object
// can stand in for process.env without any other code observing it; it is put back in all cases.
const ENV_SWAPPABLE = Object.getOwnPropertyDescriptor(process, 'env')?.writable === true
const PLAIN_ENV: NodeJS.ProcessEnv = Object.freeze({}) as NodeJS.ProcessEnv

function withPlainEnv<T>(fn: () => T): T {
  if (!ENV_SWAPPABLE) return fn()
  const env = process.env
  process.env = PLAIN_ENV
  try {
    return fn()
  } finally {
    process.env = env
  }
}

/** Parses YAML text; syntax errors become diagnostics on the returned reader. */
export function parseYaml(source: string): Parsed {
  const lines = new LineCounter()
  const doc = withPlainEnv(() => parseDocument(source, { lineCounter: lines, uniqueKeys: false, prettyErrors: false, strict: true, keepSourceTokens: false }))
  const reader = new Reader(doc, lines)
  for (const e of doc.errors) {
    const offset = e.pos?.[0] ?? 0
    const { line, col } = lines.linePos(offset)
    reader.diagnostics.push({ severity: 'error', code: 'yaml_syntax', message: `YAML syntax error: ${e.message.split('\n')[0]}`, path: '', line, column: col, rule: 'yaml_syntax' })
  }
  for (const w of doc.warnings) {
    const { line, col } = lines.linePos(w.pos?.[0] ?? 0)
    reader.diagnostics.push({ severity: 'warning', code: 'yaml_syntax', message: `YAML warning: ${w.message.split('\n')[0]}`, path: '', line, column: col, rule: 'yaml_syntax' })
  }
  return { reader, root: (doc.contents as Node | null) ?? null }
}

export type ValueKind = 'string' | 'bool' | 'int' | 'list' | 'map' | 'any'

export interface Field {
  key: string
  keyNode: Node
  node: Node | null
  path: string
}

/** A YAML mapping being validated: known keys, unknown-key and duplicate-key reporting, typed reads. */
export class MapReader {
  readonly fields = new Map<string, Field>()

  constructor(
    readonly r: Reader,
    readonly node: YAMLMap,
    readonly path: string,
    allowed: readonly string[],
    what: string,
  ) {
    for (const pair of node.items as Pair<unknown, unknown>[]) {
      const keyNode = r.resolve(pair.key)
      const key = keyNode && isScalar(keyNode) ? String(keyNode.value) : undefined
      if (key === undefined || !keyNode) {
        r.error('invalid_type', `${what} keys must be strings`, path, (pair.key as Node) ?? node)
        continue
      }
      const fieldPath = pointer(path, key)
      if (this.fields.has(key)) {
        r.error('duplicate_key', `duplicate key "${key}" in ${what}`, fieldPath, keyNode)
        continue
      }
      if (!allowed.includes(key)) {
        r.error('unknown_key', `unknown key "${key}" in ${what}; expected one of: ${allowed.join(', ')}`, fieldPath, keyNode)
        continue
      }
      this.fields.set(key, { key, keyNode, node: r.resolve(pair.value), path: fieldPath })
    }
  }

  has(key: string): boolean {
    return this.fields.has(key)
  }

  field(key: string): Field | undefined {
    return this.fields.get(key)
  }

  /** Reports a missing required key at the map that should hold it. */
  require(key: string, what: string, why?: string): boolean {
    if (this.fields.has(key)) return true
    this.r.error('missing_key', `${what} requires "${key}"${why ? ` ${why}` : ''}`, pointer(this.path, key), this.node)
    return false
  }

  /** Reports a present key that the context forbids. */
  reject(key: string, why: string): void {
    const f = this.fields.get(key)
    if (f) this.r.error('field_rejected', `"${key}" is not allowed ${why}`, f.path, f.keyNode)
  }

  str(key: string): { value: string; field: Field } | undefined {
    const f = this.fields.get(key)
    if (!f) return undefined
    if (f.node && isScalar(f.node) && typeof f.node.value === 'string') return { value: f.node.value, field: f }
    // An empty value (`key:`) reads as the empty string where the spec allows "" (e.g. request_format).
    if (f.node && isScalar(f.node) && f.node.value === null) return { value: '', field: f }
    this.r.error('invalid_type', `"${key}" must be a string`, f.path, f.node ?? f.keyNode)
    return undefined
  }

  bool(key: string): { value: boolean; field: Field } | undefined {
    const f = this.fields.get(key)
    if (!f) return undefined
    if (f.node && isScalar(f.node) && typeof f.node.value === 'boolean') return { value: f.node.value, field: f }
    this.r.error('invalid_type', `"${key}" must be true or false`, f.path, f.node ?? f.keyNode)
    return undefined
  }

  /** A non-negative int64 (as a JS number; values beyond 2^53 are clamped, which no budget reaches). */
  nonNegativeInt(key: string): { value: number; field: Field } | undefined {
    const f = this.fields.get(key)
    if (!f) return undefined
    const v = f.node && isScalar(f.node) ? f.node.value : undefined
    const n = typeof v === 'number' ? v : typeof v === 'bigint' ? Number(v) : NaN
    // Doubles cannot tell 2^63 from 2^63-1: check the literal as written.
    const src = f.node && isScalar(f.node) ? f.node.source : undefined
    const tooBig = typeof src === 'string' && /^\+?\d+$/.test(src) && BigInt(src) > 9223372036854775807n
    if (!Number.isInteger(n) || n < 0 || tooBig) {
      this.r.error('invalid_number', `"${key}" must be a non-negative integer (int64)`, f.path, f.node ?? f.keyNode)
      return undefined
    }
    return { value: Math.min(n, Number.MAX_SAFE_INTEGER), field: f }
  }

  list(key: string): { items: { node: Node | null; path: string }[]; field: Field } | undefined {
    const f = this.fields.get(key)
    if (!f) return undefined
    if (!f.node || !isSeq(f.node)) {
      this.r.error('invalid_type', `"${key}" must be a list`, f.path, f.node ?? f.keyNode)
      return undefined
    }
    return { items: seqItems(this.r, f.node, f.path), field: f }
  }

  strList(key: string): { items: { value: string; node: Node; path: string }[]; field: Field } | undefined {
    const l = this.list(key)
    if (!l) return undefined
    const items: { value: string; node: Node; path: string }[] = []
    for (const it of l.items) {
      if (it.node && isScalar(it.node) && typeof it.node.value === 'string') items.push({ value: it.node.value, node: it.node, path: it.path })
      else this.r.error('invalid_type', `"${key}" entries must be strings`, it.path, it.node ?? l.field.node)
    }
    return { items, field: l.field }
  }

  map(key: string): { node: YAMLMap; field: Field } | undefined {
    const f = this.fields.get(key)
    if (!f) return undefined
    if (!f.node || !isMap(f.node)) {
      this.r.error('invalid_type', `"${key}" must be a mapping`, f.path, f.node ?? f.keyNode)
      return undefined
    }
    return { node: f.node, field: f }
  }
}

/** Reports duplicate keys anywhere below `node` (used for free-form values such as request_schema). */
export function scanDuplicateKeys(r: Reader, node: Node | null, path: string, depth = 0): void {
  if (!node || depth > 64) return
  if (isMap(node)) {
    const seen = new Set<string>()
    for (const pair of node.items as Pair<unknown, unknown>[]) {
      const k = r.resolve(pair.key)
      if (!k || !isScalar(k)) continue
      const key = String(k.value)
      if (seen.has(key)) r.error('duplicate_key', `duplicate key "${key}"`, pointer(path, key), k)
      seen.add(key)
      scanDuplicateKeys(r, r.resolve(pair.value), pointer(path, key), depth + 1)
    }
  } else if (isSeq(node)) {
    seqItems(r, node, path).forEach((it) => scanDuplicateKeys(r, it.node, it.path, depth + 1))
  }
}

export function seqItems(r: Reader, node: YAMLSeq, path: string): { node: Node | null; path: string }[] {
  return (node.items as unknown[]).map((it, i) => ({ node: r.resolve(it), path: pointer(path, i) }))
}
