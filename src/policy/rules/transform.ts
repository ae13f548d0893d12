// TransformRule: exactly one of header, path, query, body, auth; direction, applies_to, requires_body.

import { isMap, type Node } from 'yaml'
import RE2 from 're2'
import { isAuthProvider } from '../auth-providers.js'
import type { CTransform } from '../model.js'
import { MapReader, type Field, type Reader } from '../yaml-reader.js'
import { celOf, enumOf } from './shared.js'

const VARIANTS = ['header', 'path', 'query', 'body', 'auth'] as const
type Variant = (typeof VARIANTS)[number]
const KEYS = ['name', 'direction', 'applies_to', 'requires_body', ...VARIANTS] as const
// RFC 7230 token characters.
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/

export interface TransformResult {
  transform?: CTransform
  kind?: Variant
  name?: { value: string; field: Field }
  appliesTo: { value: string; node: Node; path: string }[]
  requiresBody: boolean
  /** A header transform that sets Accept-Encoding to the CEL literal "identity". */
  pinsIdentity: boolean
  node: Node
  path: string
}

export function checkTransform(r: Reader, node: Node | null, path: string, index: number): TransformResult | undefined {
  if (!node || !isMap(node)) {
    r.error('invalid_type', 'a transform must be a mapping', path, node)
    return undefined
  }
  const before = r.diagnostics.filter((d) => d.severity === 'error').length
  const m = new MapReader(r, node, path, KEYS, 'transform')
  const name = m.str('name')
  const direction = m.str('direction')
  if (direction && direction.value !== '' && direction.value !== 'request') {
    const msg = direction.value === 'response' ? 'direction "response" is not supported: transforms mutate requests only' : `direction must be "" or "request"; got ${JSON.stringify(direction.value)}`
    r.error('invalid_direction', msg, direction.field.path, direction.field.node)
  }
  const applies = m.strList('applies_to')
  const requiresBody = m.bool('requires_body')?.value ?? false

  const present = VARIANTS.filter((v) => m.has(v))
  const result: TransformResult = {
    node,
    path,
    appliesTo: applies?.items ?? [],
    requiresBody,
    pinsIdentity: false,
    ...(name ? { name: { value: name.value, field: name.field } } : {}),
  }
  if (present.length !== 1) {
    const msg = present.length === 0 ? 'a transform needs exactly one of header, path, query, body, auth' : `a transform needs exactly one of header, path, query, body, auth; found ${present.join(', ')}`
    const where = present.length > 1 ? m.field(present[1])! : undefined
    r.error('transform_variant', msg, where?.path ?? path, where?.keyNode ?? node)
    return result
  }
  const kind = present[0]
  result.kind = kind
  const vm = m.map(kind)
  if (!vm) return result
  const key = name && name.value !== '' ? name.value : `transform[${index}]`
  const base: Base = { index, key, appliesTo: applies && applies.items.length > 0 ? new Set(applies.items.map((i) => i.value)) : null, requiresBody: kind === 'body' ? true : requiresBody, ...(name && name.value !== '' ? { name: name.value } : {}) }
  const opts = { withBody: requiresBody }
  let t: CTransform | undefined
  switch (kind) {
    case 'header':
      t = headerTransform(r, vm, base, opts, result)
      break
    case 'path':
      t = pathTransform(r, vm, base, opts)
      break
    case 'query':
      t = queryTransform(r, vm, base, opts)
      break
    case 'body':
      t = bodyTransform(r, vm, base, opts)
      break
    case 'auth':
      t = authTransform(r, vm, base, opts, m)
      break
  }
  const after = r.diagnostics.filter((d) => d.severity === 'error').length
  if (after === before && t) result.transform = t
  return result
}

type VariantMap = NonNullable<ReturnType<MapReader['map']>>
type Base = { index: number; key: string; appliesTo: Set<string> | null; requiresBody: boolean; name?: string }

function headerTransform(r: Reader, vm: VariantMap, base: Base, opts: { withBody: boolean }, result: TransformResult): CTransform | undefined {
  const v = new MapReader(r, vm.node, vm.field.path, ['name', 'action', 'value'], 'header transform')
  v.require('name', 'a header transform')
  v.require('action', 'a header transform')
  const hn = v.str('name')
  if (hn && !TOKEN.test(hn.value)) r.error('invalid_header_name', `header name ${JSON.stringify(hn.value)} is not an RFC 7230 token`, hn.field.path, hn.field.node)
  const action = enumOf(v, 'action', ['set', 'add', 'remove'] as const)
  let value
  if (action === 'remove') v.reject('value', 'when action is remove')
  else if (action && v.require('value', `a header "${action}" transform`)) value = celOf(v, 'value', 'transform_header', 'string', opts)
  const raw = v.str('value')?.value.trim()
  result.pinsIdentity = hn?.value.toLowerCase() === 'accept-encoding' && action === 'set' && (raw === '"identity"' || raw === "'identity'")
  if (hn && action) return { ...base, kind: 'header', header: hn.value.toLowerCase(), action, ...(value ? { value } : {}) }
  return undefined
}

function pathTransform(r: Reader, vm: VariantMap, base: Base, opts: { withBody: boolean }): CTransform | undefined {
  const v = new MapReader(r, vm.node, vm.field.path, ['action', 'pattern', 'value'], 'path transform')
  v.require('action', 'a path transform')
  const action = enumOf(v, 'action', ['replace', 'prefix'] as const)
  let pattern: RE2 | undefined
  if (action === 'prefix') v.reject('pattern', 'when action is prefix')
  if (action === 'replace' && v.require('pattern', 'a path "replace" transform')) {
    const p = v.str('pattern')
    if (p) {
      try {
        pattern = new RE2(p.value, 'gu')
      } catch (e) {
        r.error('invalid_regex', `pattern ${JSON.stringify(p.value)} is not valid RE2: ${(e as Error).message}`, p.field.path, p.field.node)
      }
    }
  }
  const value = v.require('value', 'a path transform') ? celOf(v, 'value', 'transform_path', 'string', opts) : undefined
  const raw = v.str('value')
  if (action === 'replace' && raw && /\$\d|\$\{|\\\d/.test(raw.value)) {
    r.warn('substitution_backreference', 'path replacement values are literal: "$1" and "\\1" are not expanded', raw.field.path, raw.field.node)
  }
  if (action && value && (action === 'prefix' || pattern)) return { ...base, kind: 'path', action, value, ...(pattern ? { pattern } : {}) }
  return undefined
}

function queryTransform(r: Reader, vm: VariantMap, base: Base, opts: { withBody: boolean }): CTransform | undefined {
  const v = new MapReader(r, vm.node, vm.field.path, ['action', 'key', 'value'], 'query transform')
  v.require('action', 'a query transform')
  v.require('key', 'a query transform')
  const action = enumOf(v, 'action', ['set', 'remove'] as const)
  const k = v.str('key')
  if (k && k.value === '') r.error('missing_key', 'query transform "key" may not be empty', k.field.path, k.field.node)
  let value
  if (action === 'remove') v.reject('value', 'when action is remove')
  else if (action === 'set' && v.require('value', 'a query "set" transform')) value = celOf(v, 'value', 'transform_query', 'string', opts)
  if (action && k && k.value !== '') return { ...base, kind: 'query', action, param: k.value, ...(value ? { value } : {}) }
  return undefined
}

function bodyTransform(r: Reader, vm: VariantMap, base: Base, opts: { withBody: boolean }): CTransform | undefined {
  const v = new MapReader(r, vm.node, vm.field.path, ['action', 'key', 'value'], 'body transform')
  v.require('action', 'a body transform')
  const action = enumOf(v, 'action', ['merge', 'prefix'] as const)
  if (action === 'merge') v.reject('key', 'when action is merge')
  const k = action === 'prefix' && v.require('key', 'a body "prefix" transform') ? v.str('key') : undefined
  const value = v.require('value', 'a body transform') && action ? celOf(v, 'value', 'transform_body', action === 'merge' ? 'map' : 'string') : undefined
  if (action && value && (action === 'merge' || k)) return { ...base, kind: 'body', action, value, ...(k ? { field: k.value } : {}) }
  return undefined
}

function authTransform(r: Reader, vm: VariantMap, base: Base, opts: { withBody: boolean }, m: MapReader): CTransform | undefined {
  m.reject('requires_body', 'on an auth transform')
  const v = new MapReader(r, vm.node, vm.field.path, ['credential', 'provider'], 'auth transform')
  v.require('credential', 'an auth transform')
  v.require('provider', 'an auth transform')
  const cred = v.str('credential')
  const prov = v.str('provider')
  if (cred && cred.value === '') r.error('missing_key', 'auth transform "credential" may not be empty', cred.field.path, cred.field.node)
  if (prov && !isAuthProvider(prov.value)) r.error('unknown_provider', `unknown auth provider ${JSON.stringify(prov.value)} (see docs/policy.md for the list)`, prov.field.path, prov.field.node)
  if (cred && prov && cred.value !== '' && isAuthProvider(prov.value)) return { ...base, kind: 'auth', credential: cred.value, provider: prov.value, requiresBody: false }
  return undefined
}
