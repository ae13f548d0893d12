// The appender and verification encode each row straight from the driver's row (storedRowBytes);
// the leaf bytes must be exactly those of the row as the API returns it (canonicalRow over
// fromRow), for any row either dialect can hand back (as an object, or as an array of values in its
// columns' order, which is how verification reads): TEXT or parsed JSON columns, integers as
// numbers or digit strings, absent columns as null, and extra columns of a join left out.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { canonicalJson, canonicalRow, hashLeaf, hashLeafHex, rowEncoder, storedRowBytes } from '../../../src/audit/merkle/index.js'
import { createHash } from 'node:crypto'
import type { AuditEvent } from '../../../src/contract/index.js'
import { AUDIT_INT_COLUMNS, AUDIT_JSON_COLUMNS, AUDIT_TEXT_COLUMNS, LEAF_COLUMNS, QUEUE_COLUMNS } from '../../../src/store/index.js'
import { fromRow } from '../../../src/store/repositories/audit.js'

const json = fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.parse(JSON.stringify(v)) as unknown)
const text = fc.string({ unit: 'binary', maxLength: 20 })

const rawRow = fc.record({
  id: fc.uuid(), org_id: text, user_id: text, timestamp: text, ts: fc.oneof(fc.integer(), fc.constant('1767225600000')),
  event_type: text, category: text, actor: text,
  ...Object.fromEntries(AUDIT_TEXT_COLUMNS.map((c) => [c, fc.option(text)])),
  ...Object.fromEntries(AUDIT_INT_COLUMNS.map((c) => [c, fc.option(fc.oneof(fc.integer(), fc.integer().map(String)))])),
  // SQLite hands JSON columns back as their text (key order as written), PostgreSQL parsed (a
  // parsed string would be read as text by both, so the parsed shape is never a string here).
  ...Object.fromEntries(AUDIT_JSON_COLUMNS.map((c) => [c, fc.option(fc.oneof(json.filter((v) => typeof v !== 'string'), json.map((v) => JSON.stringify(v))))])),
}) as fc.Arbitrary<Record<string, unknown>>

describe('a stored row\'s leaf bytes', () => {
  it('are the API row\'s RFC 8785 bytes, for any row either dialect returns', () => {
    fc.assert(fc.property(rawRow, (raw) => {
      expect(storedRowBytes(raw)).toBe(canonicalRow(fromRow(raw)))
    }), { numRuns: 500 })
  })

  it('leave out the columns a join adds, whatever the shape before', () => {
    fc.assert(fc.property(rawRow, rawRow, fc.boolean(), (a, b, leafJoin) => {
      const extra = leafJoin ? { l_idx: 3, l_event_id: a.id, l_leaf_hash: 'ab' } : { p_seq: 4, p_event_id: a.id, p_org_id: 'o', p_leafed: null }
      expect(storedRowBytes(b)).toBe(canonicalRow(fromRow(b)))
      expect(storedRowBytes({ ...a, ...extra }, leafJoin ? LEAF_COLUMNS : QUEUE_COLUMNS)).toBe(canonicalRow(fromRow(a)))
    }), { numRuns: 200 })
  })

  it('are the same from the row as an array of values, in any column order, with a join\'s columns left out', () => {
    fc.assert(fc.property(rawRow, fc.boolean(), fc.integer(), (raw, withLeaf, seed) => {
      const row: Record<string, unknown> = withLeaf ? { l_idx: 3, l_event_id: raw.id, l_leaf_hash: 'ab', ...raw } : { ...raw }
      const columns = Object.keys(row)
      // A shuffled order: the encoder sorts by name, whatever order the driver returns.
      for (let i = columns.length - 1; i > 0; i--) {
        const j = Math.abs(seed + i * 7919) % (i + 1)
        ;[columns[i], columns[j]] = [columns[j], columns[i]]
      }
      const encode = rowEncoder(columns, LEAF_COLUMNS)
      expect(encode(columns.map((c) => row[c]))).toBe(canonicalRow(fromRow(raw)))
    }), { numRuns: 500 })
  })

  it('of a row as an array, like the object\'s: a JSON column that does not parse throws (the row reads as changed)', () => {
    const encode = rowEncoder(['id', 'org_id', 'detail', 'latency_ms'])
    expect(() => encode(['x', 'o', '{"truncated', null])).toThrow()
    expect(encode(['x', 'o', null, 'abc'])).toBe('{"id":"x","latency_ms":null,"org_id":"o"}')
  })

  it('differ when any column\'s value differs', () => {
    fc.assert(fc.property(rawRow, fc.constantFrom(...AUDIT_TEXT_COLUMNS, 'user_id', 'event_type'), text, (raw, column, value) => {
      fc.pre(raw[column] !== value)
      expect(storedRowBytes({ ...raw, [column]: value })).not.toBe(storedRowBytes(raw))
    }), { numRuns: 200 })
  })

  it('hash as SHA-256(0x00 || UTF-8 bytes), lone surrogates included', () => {
    fc.assert(fc.property(fc.string({ unit: 'binary', maxLength: 200 }), (s) => {
      const reference = createHash('sha256').update(Buffer.from([0])).update(Buffer.from(s, 'utf8')).digest()
      expect(hashLeaf(s).equals(reference)).toBe(true)
      expect(hashLeafHex(s)).toBe(reference.toString('hex'))
    }))
  })

  it('of an integer column that holds no number read as a different row, not as an error', () => {
    const raw = { id: 'x', org_id: 'o', latency_ms: 'abc' }
    expect(storedRowBytes(raw)).toBe('{"id":"x","latency_ms":null,"org_id":"o"}')
    expect(storedRowBytes(raw)).not.toBe(canonicalRow({ id: 'x', org_id: 'o' } as unknown as AuditEvent))
  })

  it('of a JSON value are JSON.stringify\'s text of each key and value, keys sorted by UTF-16 code units', () => {
    // The reference: every key and primitive through JSON.stringify (the encoder quotes strings
    // that need no escaping itself and dispatches on the type first).
    const reference = (v: unknown): string => {
      if (v === null || typeof v !== 'object') return JSON.stringify(v)
      if (Array.isArray(v)) return `[${v.map((x) => (x === undefined ? 'null' : reference(x))).join(',')}]`
      const o = v as Record<string, unknown>
      return `{${Object.keys(o).sort().filter((k) => o[k] !== undefined).map((k) => `${JSON.stringify(k)}:${reference(o[k])}`).join(',')}}`
    }
    const anyText = fc.string({ unit: 'binary', maxLength: 12 })
    const value: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
      v: fc.oneof({ depthSize: 'small' }, fc.constant(null), fc.boolean(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer(), anyText, tie('a'), tie('o')),
      a: fc.array(tie('v'), { maxLength: 4 }),
      o: fc.dictionary(fc.oneof(anyText, fc.integer({ min: 0, max: 20 }).map(String)), tie('v'), { maxKeys: 5 }),
    })).v
    fc.assert(fc.property(value, (v) => {
      expect(canonicalJson(v)).toBe(reference(v))
    }), { numRuns: 2_000 })
    expect(() => canonicalJson({ a: Infinity })).toThrow()
    expect(canonicalJson([undefined, { a: undefined, b: true }])).toBe('[null,{"b":true}]')
  })
})
