// Helpers shared by the rule checks: CEL compilation with diagnostics, enums, names.

import { isMap, isScalar, type Node } from 'yaml'
import { compileCel, type CelProgram, type CelResultKind, type CelSite, type CelSiteOptions } from '../cel.js'
import { scanDuplicateKeys, type Field, type MapReader, type Reader } from '../yaml-reader.js'

export const NAME_PATTERN = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/

/** Compiles a CEL field, reporting every issue at the expression's node. */
export function celField(r: Reader, field: Field, source: string, site: CelSite, expected: CelResultKind, opts?: CelSiteOptions): CelProgram | undefined {
  const res = compileCel(source, site, expected, opts)
  if (res.ok) {
    r.celCosts.push({ cost: res.program.cost, path: field.path, node: field.node ?? field.keyNode })
    return res.program
  }
  for (const issue of res.issues) r.error(issue.code, issue.message, field.path, field.node ?? field.keyNode)
  return undefined
}

/** Reads a CEL string field (required or optional) and compiles it. */
export function celOf(m: MapReader, key: string, site: CelSite, expected: CelResultKind, opts?: CelSiteOptions): CelProgram | undefined {
  // `value: 1` or `expr: true` are CEL literals that YAML read as a number or a bool: take the text as written.
  const f = m.field(key)
  if (f?.node && isScalar(f.node) && (typeof f.node.value === 'number' || typeof f.node.value === 'boolean')) {
    return celField(m.r, f, f.node.source ?? String(f.node.value), site, expected, opts)
  }
  const s = m.str(key)
  if (!s) return undefined
  if (s.value.trim() === '') {
    m.r.error('cel_syntax', `"${key}" is an empty CEL expression`, s.field.path, s.field.node ?? s.field.keyNode)
    return undefined
  }
  return celField(m.r, s.field, s.value, site, expected, opts)
}

/** Reads a string field constrained to a closed enum. */
export function enumOf<T extends string>(m: MapReader, key: string, values: readonly T[]): T | undefined {
  const s = m.str(key)
  if (!s) return undefined
  if ((values as readonly string[]).includes(s.value)) return s.value as T
  const shown = values.map((v) => (v === '' ? '""' : v)).join(', ')
  m.r.error('invalid_enum', `"${key}" must be one of ${shown}; got ${JSON.stringify(s.value)}`, s.field.path, s.field.node ?? s.field.keyNode)
  return undefined
}

/** Validates a capability or counter name. */
export function checkName(r: Reader, value: string, path: string, node: Node | null, what: string): boolean {
  if (value.startsWith('_')) {
    r.error('reserved_name', `${what} "${value}" starts with "_", which is reserved for the platform`, path, node)
    return false
  }
  if (!NAME_PATTERN.test(value)) {
    r.error('invalid_name', `${what} "${value}" must match [A-Za-z][A-Za-z0-9_-]{0,63}`, path, node)
    return false
  }
  return true
}

/** A JSON Schema written as a YAML mapping or a JSON literal string; undefined (reported) when it cannot be read. */
export function readSchemaValue(r: Reader, sf: Field, what: string): unknown {
  if (sf.node && isScalar(sf.node) && typeof sf.node.value === 'string') {
    try {
      return JSON.parse(sf.node.value)
    } catch (e) {
      r.error('invalid_schema', `${what} JSON literal does not parse: ${(e as Error).message}`, sf.path, sf.node)
      return undefined
    }
  }
  if (sf.node && (isMap(sf.node) || (isScalar(sf.node) && typeof sf.node.value === 'boolean'))) {
    const before = r.diagnostics.length
    scanDuplicateKeys(r, sf.node, sf.path)
    if (r.diagnostics.length > before) return undefined
    try {
      return sf.node.toJS(r.doc, { maxAliasCount: 50 })
    } catch {
      r.error('document_too_complex', `${what} expands too many aliases`, sf.path, sf.node)
      return undefined
    }
  }
  r.error('invalid_type', `${what} must be a mapping or a JSON literal string`, sf.path, sf.node ?? sf.keyNode)
  return undefined
}
