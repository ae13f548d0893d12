// BudgetCounter: source-dependent required/rejected fields, scopes, status_codes, terminators.

import { isMap, isScalar, isSeq, type Node } from 'yaml'
import type { CelProgram } from '../cel.js'
import { makeCounter, parseStatusCodes, type CounterSpec } from '../counters.js'
import type { BudgetScope, CompiledCounter, CounterSource } from '../types.js'
import { MapReader, pointer, seqItems, type Reader } from '../yaml-reader.js'
import { celOf, checkName, enumOf } from './shared.js'

const KEYS = [
  'name', 'source', 'value', 'requires_body', 'framing', 'format', 'encoding', 'sse_event', 'status_codes', 'accumulator',
  'reserve_per_request', 'failure_charge', 'max_concurrent', 'workspace', 'task', 'terminal_event_type', 'terminal_sentinel', 'terminal_cel', 'direction', 'tools',
] as const
const TERMINATORS = ['terminal_event_type', 'terminal_sentinel', 'terminal_cel'] as const
const SOURCES = ['request.count', 'request.bytes', 'response.bytes', 'response', 'websocket.messages', 'websocket.bytes', 'websocket.message', 'mcp.calls'] as const
const DIRECTIONS = ['both', 'to_upstream', 'to_agent'] as const

export interface CounterResult {
  counter?: CompiledCounter
  name?: { value: string; node: Node; path: string }
  /** Reads the response body (response.bytes or a body-phase response counter). */
  readsBody: boolean
  node: Node
  path: string
}

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/** Parses durations like `90s`, `5m`, `1h30m`, `24h`, `500ms`; undefined when malformed. */
export function parseDuration(s: string): number | undefined {
  if (!/^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+$/.test(s)) return undefined
  let total = 0
  for (const m of s.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d)/g)) total += Number(m[1]) * UNITS[m[2]]
  return total
}

type ScopeRead = BudgetScope & { nodes: { max?: Node | null; ttl?: Node | null } }

function checkScope(r: Reader, m: MapReader, key: 'workspace' | 'task'): ScopeRead | undefined {
  const mm = m.map(key)
  if (!mm) return undefined
  const s = new MapReader(r, mm.node, mm.field.path, ['max', 'ttl'], `${key} scope`)
  const maxRead = s.nonNegativeInt('max')
  const max = maxRead?.value ?? 0
  const ttl = s.str('ttl')
  const scope: ScopeRead = { max, nodes: { max: maxRead?.field.node, ttl: ttl?.field.node } }
  if (ttl && ttl.value !== '') {
    const ms = parseDuration(ttl.value)
    if (ms === undefined || ms <= 0) r.error('invalid_duration', `ttl ${JSON.stringify(ttl.value)} must be a positive duration such as 90s, 5m, 1h30m or 24h`, ttl.field.path, ttl.field.node)
    else Object.assign(scope, { ttl: ttl.value, ttlMs: ms })
  }
  return scope
}

export function checkCounter(r: Reader, node: Node | null, path: string, capability: string): CounterResult | undefined {
  if (!node || !isMap(node)) {
    r.error('invalid_type', 'a counter must be a mapping', path, node)
    return undefined
  }
  const before = r.diagnostics.filter((d) => d.severity === 'error').length
  const m = new MapReader(r, node, path, KEYS, 'counter')
  m.require('name', 'a counter')
  m.require('source', 'a counter')
  const name = m.str('name')
  if (name) checkName(r, name.value, name.field.path, name.field.node, 'counter name')
  const source = enumOf(m, 'source', SOURCES)
  const requiresBody = m.bool('requires_body')?.value
  const result: CounterResult = {
    node,
    path,
    readsBody: source === 'response.bytes' || (source === 'response' && requiresBody === true),
    ...(name ? { name: { value: name.value, node: name.field.node ?? name.field.keyNode, path: name.field.path } } : {}),
  }

  const bodyPhase = source === 'response' && requiresBody === true
  const { framing, value, terminalCel } = checkSourceFields(r, m, source, bodyPhase, path, node)
  const websocket = source?.startsWith('websocket.') === true
  const direction = websocket ? enumOf(m, 'direction', DIRECTIONS) : undefined
  if (!websocket) m.reject('direction', 'unless the source is websocket.*')

  const sc = m.field('status_codes')
  const statusCodes = sc ? checkStatusCodes(r, sc) : []

  const accumulator = websocket ? undefined : source === 'response' ? enumOf(m, 'accumulator', ['max', 'sum', 'last'] as const) : m.has('accumulator') ? enumOf(m, 'accumulator', ['max', 'sum', 'last'] as const) : undefined
  const reserve = m.nonNegativeInt('reserve_per_request')
  const failureCharge = m.nonNegativeInt('failure_charge')
  const maxConcurrent = m.nonNegativeInt('max_concurrent')
  const sseEvent = m.str('sse_event')
  const terminalEventType = m.str('terminal_event_type')
  const terminalSentinel = m.str('terminal_sentinel')
  const workspace = checkScope(r, m, 'workspace')
  const task = checkScope(r, m, 'task')
  // mcp.calls: which tools a call of counts (names as the MCP policy spells them; exact).
  const tools = source === 'mcp.calls' ? m.strList('tools')?.items.map((t) => t.value) : (m.reject('tools', 'unless source is mcp.calls'), undefined)

  checkScopeOrder(r, m, workspace, task, failureCharge)

  const after = r.diagnostics.filter((d) => d.severity === 'error').length
  if (after > before || !name || !source) return result

  const limited = (workspace?.max ?? 0) > 0 || (task?.max ?? 0) > 0 || (maxConcurrent?.value ?? 0) > 0
  if (!limited) r.warn('counter_never_fires', `counter "${name.value}" has no workspace or task max and no max_concurrent: it meters but never limits`, path, node)
  else if (statusCodes.length > 0 && statusCodes.every((c) => c.startsWith('1'))) {
    r.warn('counter_never_fires', `counter "${name.value}" only counts 1xx responses, which never end a request`, sc!.path, sc!.node)
  }

  const spec: CounterSpec = {
    name: name.value,
    capability,
    source: source as CounterSource,
    phase: source.startsWith('request.') || source === 'mcp.calls' ? 'request' : websocket ? 'websocket' : bodyPhase ? 'response_body' : 'response_headers',
    ...(framing ? { framing } : {}),
    ...(direction ? { direction } : {}),
    ...(accumulator ? { accumulator } : {}),
    ...(workspace ? { workspace: scopeOf(workspace) } : {}),
    ...(task ? { task: scopeOf(task) } : {}),
    reservePerRequest: reserve?.value ?? 0,
    failureCharge: failureCharge?.value ?? 0,
    maxConcurrent: maxConcurrent?.value ?? 0,
    statusCodes,
    ...(value ? { value } : {}),
    ...(sseEvent && sseEvent.value !== '' ? { sseEvent: sseEvent.value } : {}),
    ...(terminalEventType ? { terminalEventType: terminalEventType.value } : {}),
    ...(terminalSentinel ? { terminalSentinel: terminalSentinel.value } : {}),
    ...(terminalCel ? { terminalCel } : {}),
    ...(tools ? { tools: Object.freeze(tools) } : {}),
  }
  result.counter = makeCounter(spec)
  return result
}

type Source = (typeof SOURCES)[number]

/** The fields each source requires or rejects, and the CEL programs it reads. */
function checkSourceFields(r: Reader, m: MapReader, source: Source | '' | undefined, bodyPhase: boolean, path: string, node: Node) {
  const reject = (keys: readonly string[], why: string) => keys.forEach((k) => m.reject(k, why))
  let framing: 'single_document' | 'sse' | '' | undefined
  let value: CelProgram | undefined
  let terminalCel: CelProgram | undefined

  if (source === 'websocket.messages' || source === 'websocket.bytes') {
    reject(['value', 'requires_body', 'sse_event', 'failure_charge', 'framing', 'format', 'encoding', 'status_codes', 'accumulator', ...TERMINATORS], `on a ${source} counter`)
  } else if (source === 'websocket.message') {
    m.require('value', 'a websocket.message counter')
    reject(['requires_body', 'sse_event', 'framing', 'format', 'encoding', 'status_codes', 'accumulator', ...TERMINATORS], 'on a websocket.message counter')
    if (m.has('value')) value = celOf(m, 'value', 'counter_websocket', 'number')
  } else if (source === 'request.count' || source === 'request.bytes' || source === 'mcp.calls') {
    reject(['value', 'requires_body', 'sse_event', 'reserve_per_request', 'failure_charge', 'framing', 'format', 'encoding', ...TERMINATORS], `on a ${source} counter`)
  } else if (source === 'response.bytes') {
    m.require('status_codes', 'a response.bytes counter')
    reject(['value', 'requires_body', 'sse_event', 'framing', 'format', 'encoding', ...TERMINATORS], 'on a response.bytes counter')
  } else if (source === 'response' && !bodyPhase) {
    for (const k of ['value', 'status_codes', 'accumulator']) m.require(k, 'a response counter')
    reject(['framing', 'format', 'encoding', 'sse_event', ...TERMINATORS], 'on a headers-phase response counter (requires_body false)')
    if (m.has('value')) value = celOf(m, 'value', 'counter_headers', 'number')
  } else if (bodyPhase) {
    for (const k of ['value', 'status_codes', 'accumulator', 'framing', 'format', 'encoding']) m.require(k, 'a body-phase response counter (requires_body true)')
    framing = enumOf(m, 'framing', ['', 'single_document', 'sse'] as const)
    const format = enumOf(m, 'format', ['', 'application/json'] as const)
    const encoding = enumOf(m, 'encoding', ['', 'identity'] as const)
    const need = (k: string, v: string | undefined, expected: string) => {
      const f = m.field(k)
      if (f && v === '') r.error('missing_key', `a body-phase response counter requires "${k}: ${expected}"`, f.path, f.node ?? f.keyNode)
    }
    need('framing', framing, 'single_document or sse')
    need('format', format, 'application/json')
    need('encoding', encoding, 'identity')
    if (framing !== 'sse') m.reject('sse_event', 'unless framing is sse')
    if (m.has('value') && framing) value = celOf(m, 'value', framing === 'sse' ? 'counter_sse' : 'counter_document', 'number')
    if (framing === 'sse') {
      const given = TERMINATORS.filter((t) => m.has(t))
      if (given.length !== 1) {
        const msg = given.length === 0 ? 'an SSE body counter needs exactly one terminator: terminal_event_type, terminal_sentinel or terminal_cel' : `an SSE body counter needs exactly one terminator; found ${given.join(', ')}`
        const f = given.length > 1 ? m.field(given[1])! : undefined
        r.error('terminator_count', msg, f?.path ?? pointer(path, 'terminal_event_type'), f?.keyNode ?? node)
      }
      if (m.has('terminal_cel')) terminalCel = celOf(m, 'terminal_cel', 'terminal_cel', 'bool')
    }
  }
  return { framing, value, terminalCel }
}

function checkStatusCodes(r: Reader, sc: NonNullable<ReturnType<MapReader['field']>>): string[] {
  const statusCodes: string[] = []
  if (!sc.node || !isSeq(sc.node)) {
    r.error('invalid_type', '"status_codes" must be a list', sc.path, sc.node ?? sc.keyNode)
    return statusCodes
  }
  const items = seqItems(r, sc.node, sc.path)
  if (items.length === 0) r.error('empty_list', '"status_codes" needs at least one entry', sc.path, sc.node)
  for (const it of items) {
    const raw = it.node && isScalar(it.node) && (typeof it.node.value === 'string' || typeof it.node.value === 'number') ? String(it.node.value) : undefined
    if (raw === undefined || !parseStatusCodes([raw])) {
      r.error('invalid_status_codes', `status code ${raw === undefined ? 'entry' : JSON.stringify(raw)} must be an exact code (200), a range (200-299) or a family (2xx) within 100-599`, it.path, it.node ?? sc.node)
    } else statusCodes.push(raw)
  }
  return statusCodes
}

/** A task scope fits inside the workspace scope; failure_charge fits under every max. */
function checkScopeOrder(r: Reader, m: MapReader, workspace: ScopeRead | undefined, task: ScopeRead | undefined, failureCharge: ReturnType<MapReader['nonNegativeInt']>): void {
  if (workspace && task) {
    const tf = m.field('task')!
    if (workspace.max > 0 && task.max > workspace.max) r.error('scope_order', `task max ${task.max} exceeds workspace max ${workspace.max}`, pointer(tf.path, 'max'), task.nodes.max ?? tf.node)
    if (workspace.ttlMs !== undefined && task.ttlMs !== undefined && task.ttlMs > workspace.ttlMs) r.error('scope_order', `task ttl ${task.ttl} exceeds workspace ttl ${workspace.ttl}`, pointer(tf.path, 'ttl'), task.nodes.ttl ?? tf.node)
  }
  if (failureCharge) {
    for (const [k, s] of [['workspace', workspace], ['task', task]] as const) {
      if (s && s.max > 0 && failureCharge.value > s.max) r.error('failure_charge_exceeds_max', `failure_charge ${failureCharge.value} exceeds the ${k} max ${s.max}`, failureCharge.field.path, failureCharge.field.node)
    }
  }
}

function scopeOf(s: ScopeRead): BudgetScope {
  return { max: s.max, ...(s.ttl !== undefined ? { ttl: s.ttl, ttlMs: s.ttlMs! } : {}) }
}
