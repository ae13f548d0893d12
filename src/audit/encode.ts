// The audit writer's last line of defence before the database: an event is checked against the
// closed vocabularies, every string is made storable in both dialects, and each value is
// serialized exactly once. The texts are reused for the journal line and the insert row.
//
// Why each rule exists:
// - Postgres jsonb refuses the escapes `\u0000` and lone surrogates (`\ud800`) with "invalid input
//   syntax for type json", and its text type refuses NUL; JSON.stringify emits both. They become
//   U+FFFD, counted as `sanitized` (the API refuses them at the edge with a 400 first).
// - V8's JSON.stringify recurses: a value nested thousands of levels deep overflows the stack, and
//   a cycle throws. JSON values are walked iteratively first and refused past MAX_JSON_DEPTH.
// - A row is bounded (MAX_EVENT_CHARS, MAX_TEXT_CHARS) so one event cannot stall a batch.

import { v7 as uuidv7 } from 'uuid'
import {
  AUDIT_INT_COLUMNS, AUDIT_JSON_COLUMNS, AUDIT_ROW_COLUMNS, AUDIT_TEXT_COLUMNS, epochMs, isUuid,
} from '../store/index.js'
import { ACTORS, CATEGORIES, DECISIONS, DENY_REASONS, EVENT_KINDS, EVENT_TYPES, PHASES, POLICY_TYPES, type AuditEvent, type EventKind, type EventType, type NewAuditEvent } from '../contract/index.js'

// ES2024 string methods (Node >= 20); the project's lib setting predates them.
declare global {
  interface String {
    isWellFormed(): boolean
    toWellFormed(): string
  }
}

/** Deepest nesting of a JSON column's value (the value itself is depth 1). */
export const MAX_JSON_DEPTH = 32
/** Longest text column value, in UTF-16 units. */
export const MAX_TEXT_CHARS = 65_536
/** Largest event as serialized text (its journal line), in UTF-16 units. */
export const MAX_EVENT_CHARS = 1_048_576
/** Longest kept text of a quarantined event. */
export const MAX_QUARANTINE_CHARS = 65_536

/** An event ready for the database: its journal line, a JSON object of its columns (`ts` included) that both dialects insert as it is. */
export interface EncodedEvent {
  readonly event: AuditEvent
  readonly line: string
  /** A string had NUL or a lone surrogate replaced. */
  readonly sanitized: boolean
}

/** An event that cannot be stored as a row: kept whole (as safe text) in the quarantine table. */
export interface QuarantineRecord {
  /** Quarantine row id: the event's id when it had a valid one, else a fresh UUIDv7. */
  readonly id: string
  readonly org_id: string | null
  /** `invalid_event`, `too_large`, `unserializable` or `database_refused`, then `: <detail>`. */
  readonly reason: string
  readonly text: string
}

export type EncodeResult =
  | { ok: true; value: EncodedEvent }
  | { ok: false; kind: string; reason: string; event: AuditEvent; fields?: Record<string, string> }

// [column, allowed values, required]: checked in this order, so error details list fields stably.
const VOCABULARIES: ReadonlyArray<readonly [string, ReadonlySet<string>, boolean]> = [
  ['event_type', new Set<string>(EVENT_TYPES), true],
  ['category', new Set<string>(CATEGORIES), true],
  ['actor', new Set<string>(ACTORS), true],
  ['decision', new Set<string>(DECISIONS), false],
  ['reason', new Set<string>(DENY_REASONS), false],
  ['phase', new Set<string>(PHASES), false],
  ['policy_type', new Set<string>(POLICY_TYPES), false],
]
const CANONICAL_TS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const ARRAY_COLUMNS: ReadonlySet<string> = new Set(['auth_used'])
/** The keys a stamped event may have for the one-pass encoding (`ts` is derived, never given). */
const STORED_KEYS: ReadonlySet<string> = new Set(AUDIT_ROW_COLUMNS.filter((c) => c !== 'ts'))

// Many events share a millisecond at high rates: format each millisecond once.
let lastNowMs = -1
let lastNowIso = ''
function nowIso(): string {
  const ms = Date.now()
  if (ms !== lastNowMs) {
    lastNowMs = ms
    lastNowIso = new Date(ms).toISOString()
  }
  return lastNowIso
}

/**
 * Checks an event and fills id and timestamp. Returns the stamped event and, when it breaks the
 * contract, the problem per field (the event is then stamped as far as possible).
 * (Hot path: plain loops, one fresh object, no spread-then-delete.)
 */
export function check(input: NewAuditEvent): { event: AuditEvent; fields?: Record<string, string> } {
  const src = (input ?? {}) as unknown as Record<string, unknown>
  let fields: Record<string, string> | undefined
  const fail = (name: string, message: string) => ((fields ??= {})[name] = message)
  if (typeof src.org_id !== 'string' || src.org_id === '') fail('org_id', 'must be a non-empty string')
  if (typeof src.user_id !== 'string' || src.user_id === '') fail('user_id', 'must be a non-empty string')
  // Category and actor come from the event type's entry when the producer does not name them.
  const kind = typeof src.event_type === 'string' && Object.hasOwn(EVENT_KINDS, src.event_type) ? EVENT_KINDS[src.event_type as EventType] as EventKind : undefined
  for (let i = 0; i < VOCABULARIES.length; i++) {
    const [name, allowed, required] = VOCABULARIES[i]
    const value = src[name]
    if (value === undefined || value === null) {
      if (required && !(kind && (name === 'category' || name === 'actor'))) fail(name, 'is required')
    } else if (typeof value !== 'string' || !allowed.has(value)) fail(name, `must be one of: ${[...allowed].join(', ')}`)
  }
  const idOk = src.id === undefined || src.id === null || (typeof src.id === 'string' && isUuid(src.id))
  if (!idOk) fail('id', 'must be a UUID')
  let timestamp: string
  const ts = src.timestamp
  if (ts === undefined || ts === null) timestamp = nowIso()
  else if (typeof ts === 'string' && CANONICAL_TS.test(ts) && !Number.isNaN(Date.parse(ts))) timestamp = ts
  else {
    const ms = typeof ts === 'string' && ts.length <= 64 ? Date.parse(ts) : NaN
    if (Number.isNaN(ms)) {
      fail('timestamp', 'must be an RFC 3339 date-time')
      timestamp = nowIso()
    } else timestamp = new Date(ms).toISOString()
  }
  for (const c of AUDIT_TEXT_COLUMNS) {
    const v = src[c]
    if (v !== undefined && v !== null && typeof v !== 'string') fail(c, 'must be a string')
  }
  for (const c of AUDIT_INT_COLUMNS) {
    const v = src[c]
    // Postgres `integer` is 32-bit: a larger value would be refused by one dialect only.
    if (v !== undefined && v !== null && (!Number.isInteger(v) || (v as number) < -2147483648 || (v as number) > 2147483647)) {
      fail(c, 'must be an integer from -2147483648 to 2147483647')
    }
  }
  for (const c of AUDIT_JSON_COLUMNS) {
    const v = src[c]
    if (v === undefined || v === null) continue
    if (ARRAY_COLUMNS.has(c) ? !Array.isArray(v) : typeof v !== 'object' || Array.isArray(v)) {
      fail(c, ARRAY_COLUMNS.has(c) ? 'must be an array' : 'must be an object')
    }
  }
  const id = idOk && typeof src.id === 'string' ? src.id.toLowerCase() : uuidv7()
  const event = copyEvent(src, id, timestamp)
  if (kind) {
    event.category ??= kind.category
    event.actor ??= kind.actor
  }
  return fields ? { event: event as unknown as AuditEvent, fields } : { event: event as unknown as AuditEvent }
}

/**
 * The stamped event: id and timestamp first, then the input's own fields. Optional columns are
 * absent, never null or undefined, in stored and streamed events. A spread keeps the object in
 * V8's fast mode (adding ~25 properties one keyed store at a time turns it into a dictionary,
 * which made every later read of it, and its serialization, about twice as slow).
 */
function copyEvent(src: Record<string, unknown>, id: string, timestamp: string): Record<string, unknown> {
  let holes = false
  for (const k in src) {
    const v = src[k]
    if (v === undefined || v === null) {
      holes = true
      break
    }
  }
  if (!holes) {
    const event: Record<string, unknown> = { id, timestamp, ...src }
    event.id = id
    event.timestamp = timestamp
    return event
  }
  const event: Record<string, unknown> = { id, timestamp }
  for (const k in src) {
    if (k === 'id' || k === 'timestamp' || !Object.hasOwn(src, k)) continue
    const v = src[k]
    if (v !== undefined && v !== null) event[k] = v
  }
  return event
}

export function describeFields(fields: Record<string, string>): string {
  return Object.entries(fields).map(([k, v]) => `${k} ${v}`).join('; ')
}

/** Validates and serializes an event (never throws: a value whose getters throw is unserializable). */
export function encodeEvent(input: NewAuditEvent): EncodeResult {
  try {
    return encodeChecked(input)
  } catch (err) {
    const event = { id: uuidv7(), timestamp: nowIso() } as AuditEvent
    return { ok: false, kind: 'unserializable', reason: `unserializable: ${String((err as Error)?.message ?? err).slice(0, 200)}`, event }
  }
}

function encodeChecked(input: NewAuditEvent): EncodeResult {
  const { event, fields } = check(input)
  if (fields) return { ok: false, kind: 'invalid_event', reason: `invalid_event: ${describeFields(fields)}`, event, fields }
  const whole = encodeWhole(event)
  return whole ? { ok: true, value: whole } : encodeByColumn(event)
}

/**
 * The common case in one native JSON.stringify of the stamped event (no string built a column at a
 * time: that allocated ~5 KB per event on the proxy's hot path). It applies only when nothing needs
 * a decision: every key is a column, no text is over its limit, no JSON value is too deep or holds
 * a bigint, and the text has no escape to sanitize. Anything else returns undefined and goes
 * column by column (encodeByColumn), which sanitizes or refuses with the precise reason.
 */
function encodeWhole(event: AuditEvent): EncodedEvent | undefined {
  const e = event as unknown as Record<string, unknown>
  for (const k in e) {
    if (!STORED_KEYS.has(k)) return undefined
    const v = e[k]
    if (typeof v === 'string') {
      if (v.length > MAX_TEXT_CHARS) return undefined
    } else if (typeof v === 'object' && jsonProblem(v) !== undefined) return undefined
  }
  let json: string
  try {
    json = JSON.stringify(e)
  } catch {
    return undefined
  }
  if (json.length > MAX_EVENT_CHARS || (json.includes('\\u') && HAS_BAD_ESCAPE.test(json))) return undefined
  return { event, line: `{"ts":${epochMs(event.timestamp)},${json.slice(1)}`, sanitized: false }
}

// long-function: one pass over the columns in order, each kind (text, number, JSON) with its own
// refusal or sanitizing; splitting it would pass the half-built line around.
function encodeByColumn(event: AuditEvent): EncodeResult {
  const e = event as unknown as Record<string, unknown>
  let sanitized = false
  let line = '{'
  for (let i = 0; i < AUDIT_ROW_COLUMNS.length; i++) {
    const c = AUDIT_ROW_COLUMNS[i]
    if (c === 'ts') {
      // In the line too, so the line is a complete row (the database inserts the lines as JSON records).
      line += (line.length > 1 ? ',"ts":' : '"ts":') + epochMs(event.timestamp)
      continue
    }
    const v = e[c]
    if (v === undefined) continue
    let text: string
    if (typeof v === 'string') {
      let s = v
      if (s.length > MAX_TEXT_CHARS) return { ok: false, kind: 'too_large', reason: `too_large: ${c} is longer than ${MAX_TEXT_CHARS} characters`, event }
      if (!s.isWellFormed() || s.includes('\0')) {
        s = s.toWellFormed().replaceAll('\0', '\uFFFD')
        sanitized = true
        e[c] = s
      }
      text = JSON.stringify(s)
    } else if (typeof v === 'number') {
      text = String(v)
    } else {
      const problem = jsonProblem(v)
      if (problem) return { ok: false, kind: 'unserializable', reason: `unserializable: ${c} ${problem}`, event }
      let json: string
      try {
        json = JSON.stringify(v)
      } catch (err) {
        return { ok: false, kind: 'unserializable', reason: `unserializable: ${c} ${(err as Error)?.message ?? 'cannot be serialized'}`, event }
      }
      const safe = wellFormedJson(json)
      if (safe !== json) {
        sanitized = true
        e[c] = JSON.parse(safe)
      }
      text = safe
    }
    line += (line.length > 1 ? ',"' : '"') + c + '":' + text
    if (line.length > MAX_EVENT_CHARS) return { ok: false, kind: 'too_large', reason: `too_large: the event is larger than ${MAX_EVENT_CHARS} characters`, event }
  }
  return { ok: true, value: { event, line: line + '}', sanitized } }
}

/**
 * Why `value` is not a JSON value we store (too deep, a cycle, a bigint), or undefined. Recursion
 * is bounded by MAX_JSON_DEPTH (a cycle is refused as too deep), and allocates nothing per value.
 */
function jsonProblem(v: unknown, depth = 1): string | undefined {
  if (typeof v === 'bigint') return 'holds a bigint'
  if (v === null || typeof v !== 'object') return undefined
  if (depth > MAX_JSON_DEPTH) return `is nested deeper than ${MAX_JSON_DEPTH} levels`
  if (typeof (v as { toJSON?: unknown }).toJSON === 'function') return undefined
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const p = jsonProblem(v[i], depth + 1)
      if (p) return p
    }
    return undefined
  }
  for (const k in v) {
    if (!Object.hasOwn(v, k)) continue
    const p = jsonProblem((v as Record<string, unknown>)[k], depth + 1)
    if (p) return p
  }
  return undefined
}

// An escape JSON.stringify emits only for NUL or a lone surrogate, preceded by an even number of
// backslashes (so it is an escape, not an escaped backslash followed by text).
const BAD_ESCAPE = /(?<!\\)((?:\\\\)*)\\u(?:0000|[dD][89abAB][0-9a-fA-F]{2}|[dD][c-fC-F][0-9a-fA-F]{2})/g
const HAS_BAD_ESCAPE = new RegExp(BAD_ESCAPE.source)

/** JSON text that both SQLite and Postgres jsonb accept: NUL and lone-surrogate escapes become U+FFFD. */
export function wellFormedJson(json: string): string {
  if (!json.includes('\\u')) return json
  return json.replace(BAD_ESCAPE, '$1\\ufffd')
}

/** A quarantine record for an event that could not be encoded or was refused by the database. */
export function quarantineRecord(input: unknown, event: AuditEvent | undefined, reason: string): QuarantineRecord {
  const id = event && isUuid(event.id) ? event.id : uuidv7()
  let org: string | null = null
  try {
    const o = (input as { org_id?: unknown } | null)?.org_id
    if (typeof o === 'string' && o !== '') org = safeString(o).slice(0, 256)
  } catch {
    // a throwing getter: no org to name
  }
  return { id, org_id: org, reason: safeString(reason).slice(0, 2000), text: safeText(event ?? input) }
}

/** Any value as bounded, well-formed JSON text (cycles, depth, bigint and size are cut, never thrown). */
export function safeText(value: unknown): string {
  let budget = 20_000
  const copy = (v: unknown, depth: number): unknown => {
    if (--budget < 0) return '[cut: too many values]'
    if (typeof v === 'string') return v.length > 4096 ? `${v.slice(0, 4096)}…[cut]` : v
    if (typeof v === 'bigint') return v.toString()
    if (typeof v === 'number' || typeof v === 'boolean' || v === null) return v
    if (typeof v !== 'object') return undefined
    if (depth >= MAX_JSON_DEPTH) return '[cut: nested too deep]'
    if (Array.isArray(v)) return v.slice(0, 1000).map((x) => copy(x, depth + 1) ?? null)
    const out: Record<string, unknown> = {}
    let n = 0
    for (const k in v) {
      if (!Object.hasOwn(v, k)) continue
      if (++n > 1000) break
      const c = copy((v as Record<string, unknown>)[k], depth + 1)
      if (c !== undefined) out[k] = c
    }
    return out
  }
  let text: string
  try {
    text = JSON.stringify(copy(value, 0)) ?? 'null'
  } catch {
    text = '"[unserializable]"'
  }
  text = wellFormedJson(text)
  return text.length > MAX_QUARANTINE_CHARS ? JSON.stringify(text.slice(0, MAX_QUARANTINE_CHARS).toWellFormed()) : text
}

function safeString(s: string): string {
  return s.toWellFormed().replaceAll('\0', '\uFFFD')
}

