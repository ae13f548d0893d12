// AllowRule: domains, methods, paths, allow_insecure, allow_private, match, request_format,
// request_schema; or `passthrough: true` with domains (and allow_private) only: TLS the proxy
// splices without decrypting, so nothing it would have to read inside can be named.

import { isMap, isScalar, type Node } from 'yaml'
import { parseCidr } from '../cidr.js'
import { compileSchema } from '../json-schema.js'
import { compileDomain, compilePath, domainPatternError, normalizeDomainPattern, pathPatternError } from '../glob.js'
import type { CelProgram } from '../cel.js'
import type { CRule } from '../model.js'
import { MapReader, pointer, type Reader } from '../yaml-reader.js'
import { checkMcpServer } from './mcp.js'
import { celOf, enumOf, readSchemaValue } from './shared.js'

export const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS'] as const
const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])
const KEYS = ['name', 'domains', 'methods', 'paths', 'allow_insecure', 'allow_private', 'match', 'request_format', 'request_schema', 'mcp', 'passthrough'] as const
/** What a passthrough rule cannot enforce: it never sees the request inside the TLS it splices. */
const NOT_WITH_PASSTHROUGH = ['methods', 'paths', 'allow_insecure', 'match', 'request_format', 'request_schema', 'mcp'] as const

export interface AllowRuleResult {
  rule?: CRule
  node: Node
  path: string
  name?: { value: string; node: Node; path: string }
  hasSchema: boolean
  requestFormatJson: boolean
  /** `passthrough: true`: the capability's transforms cannot apply to it (capability.ts). */
  passthrough?: { node: Node; path: string }
}

export function checkAllowRule(r: Reader, node: Node | null, path: string, index: number): AllowRuleResult | undefined {
  if (!node || !isMap(node)) {
    r.error('invalid_type', 'an allow rule must be a mapping', path, node)
    return undefined
  }
  const errorsBefore = r.diagnostics.filter((d) => d.severity === 'error').length
  const m = new MapReader(r, node, path, KEYS, 'allow rule')
  const name = m.str('name')
  if (name && name.value === '') r.error('invalid_name', 'allow rule name may not be empty', name.field.path, name.field.node)
  const domainPatterns = checkDomains(r, m)
  const passthrough = m.bool('passthrough')
  if (passthrough?.value) return passthroughRule(r, m, node, path, index, name, domainPatterns, errorsBefore)
  const { methodSet, methods } = checkMethods(r, m)
  const pathPatterns = checkPaths(r, m, methodSet, methods)
  const insecure = m.bool('allow_insecure')
  const allowPrivate = checkAllowPrivate(r, m)
  const format = enumOf(m, 'request_format', ['', 'application/json'] as const)
  const { match, matchRequiresBody } = checkMatch(r, m)
  const sf = m.field('request_schema')
  const schema = sf ? checkRequestSchema(r, sf) : undefined
  const mcpField = m.map('mcp')
  const mcp = mcpField ? checkMcpServer(r, mcpField.node, mcpField.field.path, name?.value || `allow[${index}]`) : undefined
  const offTransport = [...methodSet].filter((x) => x !== 'POST' && x !== 'GET' && x !== 'DELETE')
  if (mcpField && offTransport.length) r.error('field_rejected', `an allow rule with "mcp" admits only POST, GET and DELETE (MCP's streamable HTTP transport); ${offTransport.join(', ')} would reach the server undecided`, mcpField.field.path, mcpField.field.keyNode)
  if (mcpField && (sf || m.has('match') || format)) r.error('field_rejected', 'an allow rule with "mcp" reads its body as JSON-RPC: request_schema, request_format and match do not apply (conditions go on the tools, resources and prompts)', mcpField.field.path, mcpField.field.keyNode)

  const bodyReaders: string[] = []
  if (sf) bodyReaders.push('request_schema')
  if (matchRequiresBody) bodyReaders.push('a body-matching match expression')
  if (bodyReaders.length > 0 && format !== 'application/json') {
    const f = m.field('request_format')
    r.error('request_format_required', `request_format: application/json is required because the rule reads the body (${bodyReaders.join(', ')})`, f?.path ?? pointer(path, 'request_format'), f?.node ?? node)
  }

  const errorsAfter = r.diagnostics.filter((d) => d.severity === 'error').length
  const result: AllowRuleResult = {
    node,
    path,
    hasSchema: sf !== undefined,
    requestFormatJson: format === 'application/json',
    ...(name && name.value !== '' ? { name: { value: name.value, node: name.field.node ?? name.field.keyNode, path: name.field.path } } : {}),
  }
  if (errorsAfter > errorsBefore) return result
  result.rule = {
    index,
    ...(name && name.value !== '' ? { name: name.value } : {}),
    key: name && name.value !== '' ? name.value : `allow[${index}]`,
    domainPatterns,
    domains: domainPatterns.map(compileDomain),
    methods: methodSet,
    pathPatterns,
    paths: pathPatterns.length > 0 ? pathPatterns.map(compilePath) : null,
    allowInsecure: insecure?.value ?? false,
    allowPrivate: Object.freeze(allowPrivate.sort()),
    ...(match ? { match } : {}),
    matchRequiresBody,
    requestFormat: format ?? '',
    ...(schema ? { schema } : {}),
    needsBody: format === 'application/json' || matchRequiresBody,
    ...(mcp ? { mcp } : {}),
    passthrough: false,
  }
  return result
}

/** A `passthrough: true` rule: domains and allow_private only; anything else is `passthrough_conflict`. */
function passthroughRule(r: Reader, m: MapReader, node: Node, path: string, index: number, name: ReturnType<MapReader['str']>, domainPatterns: string[], errorsBefore: number): AllowRuleResult {
  for (const key of NOT_WITH_PASSTHROUGH) {
    const f = m.field(key)
    if (f) r.error('passthrough_conflict', `"${key}" cannot be enforced on a passthrough rule: the proxy does not decrypt its TLS`, f.path, f.node ?? f.keyNode)
  }
  const allowPrivate = checkAllowPrivate(r, m)
  const f = m.field('passthrough')!
  const result: AllowRuleResult = {
    node, path, hasSchema: false, requestFormatJson: false,
    passthrough: { node: f.node ?? f.keyNode, path: f.path },
    ...(name && name.value !== '' ? { name: { value: name.value, node: name.field.node ?? name.field.keyNode, path: name.field.path } } : {}),
  }
  if (r.diagnostics.filter((d) => d.severity === 'error').length > errorsBefore) return result
  result.rule = {
    index,
    ...(name && name.value !== '' ? { name: name.value } : {}),
    key: name && name.value !== '' ? name.value : `allow[${index}]`,
    domainPatterns,
    domains: domainPatterns.map(compileDomain),
    // No method is admitted: a passthrough rule never matches a request the proxy reads.
    methods: new Set(),
    pathPatterns: [],
    paths: null,
    allowInsecure: false,
    allowPrivate: Object.freeze(allowPrivate.sort()),
    matchRequiresBody: false,
    requestFormat: '',
    needsBody: false,
    passthrough: true,
  }
  return result
}

function checkDomains(r: Reader, m: MapReader): string[] {
  m.require('domains', 'an allow rule')
  const domains = m.strList('domains')
  const domainPatterns: string[] = []
  if (domains && domains.items.length === 0 && domains.field.node) r.error('empty_list', '"domains" needs at least one entry', domains.field.path, domains.field.node)
  for (const d of domains?.items ?? []) {
    const p = normalizeDomainPattern(d.value)
    const err = domainPatternError(p)
    if (err) r.error('invalid_domain', err, d.path, d.node)
    else {
      if (p === '**' || p === '*') r.warn('match_all_domain', `domain pattern "${d.value}" matches every host`, d.path, d.node)
      domainPatterns.push(p)
    }
  }
  return domainPatterns
}

function checkMethods(r: Reader, m: MapReader) {
  m.require('methods', 'an allow rule')
  const methods = m.strList('methods')
  if (methods && methods.items.length === 0) r.error('empty_list', '"methods" needs at least one entry', methods.field.path, methods.field.node)
  const methodSet = new Set<string>()
  for (const it of methods?.items ?? []) {
    if ((METHODS as readonly string[]).includes(it.value)) methodSet.add(it.value)
    else {
      const hint = (METHODS as readonly string[]).includes(it.value.toUpperCase()) ? ` (methods are uppercase: ${it.value.toUpperCase()})` : ''
      r.error('invalid_method', `method "${it.value}" must be one of ${METHODS.join(', ')}${hint}`, it.path, it.node)
    }
  }
  return { methodSet, methods }
}

function checkPaths(r: Reader, m: MapReader, methodSet: Set<string>, methods: ReturnType<MapReader['strList']>): string[] {
  const paths = m.strList('paths')
  const pathPatterns: string[] = []
  for (const it of paths?.items ?? []) {
    const err = pathPatternError(it.value)
    if (err) r.error('invalid_path', err, it.path, it.node)
    else pathPatterns.push(it.value)
  }
  if (pathPatterns.length === 0 && !(paths && paths.items.length > 0)) {
    const writes = [...methodSet].filter((x) => WRITE_METHODS.has(x))
    if (writes.length > 0 && methods) r.warn('unrestricted_write', `allow rule admits ${writes.join(', ')} on every path; list the endpoints in "paths"`, methods.field.path, methods.field.node)
  }
  return pathPatterns
}

/**
 * allow_private: address ranges the proxy may connect to although they are private or special
 * (docs/policy.md "Destinations"). Addresses only: a name would be resolved by whoever controls its DNS.
 */
function checkAllowPrivate(r: Reader, m: MapReader): string[] {
  const allowPrivate: string[] = []
  for (const it of m.strList('allow_private')?.items ?? []) {
    const c = parseCidr(it.value)
    if (!c.ok) r.error('invalid_cidr', c.message, it.path, it.node)
    else {
      if (c.prefix < (c.family === 4 ? 8 : 16)) r.warn('broad_private_range', `allow_private "${it.value}" is wider than /${c.family === 4 ? 8 : 16}`, it.path, it.node)
      if (!allowPrivate.includes(c.cidr)) allowPrivate.push(c.cidr)
    }
  }
  return allowPrivate
}

function checkMatch(r: Reader, m: MapReader): { match?: CelProgram; matchRequiresBody: boolean } {
  const mm = m.map('match')
  if (!mm) return { matchRequiresBody: false }
  const mr = new MapReader(r, mm.node, mm.field.path, ['expr', 'requires_body'], 'match')
  const matchRequiresBody = mr.bool('requires_body')?.value ?? false
  const match = mr.require('expr', 'match') ? celOf(mr, 'expr', matchRequiresBody ? 'match_body' : 'match_headers', 'bool') : undefined
  return { ...(match ? { match } : {}), matchRequiresBody }
}

/** request_schema: a YAML mapping or a JSON literal string. */
function checkRequestSchema(r: Reader, sf: NonNullable<ReturnType<MapReader['field']>>): CRule['schema'] {
  const value = readSchemaValue(r, sf, 'request_schema')
  if (value === undefined) return undefined
  const res = compileSchema(value)
  if (res.ok) return res.validate
  r.error(res.code, res.message, sf.path, sf.node)
  return undefined
}
