// The SQLite bulk insert reads a batch's JSON array of records by scanning it (json-records.ts):
// each value's text is sliced out instead of parsing the JSON columns' values only to serialize
// them again. These tests hold that the scan gives exactly the rows the parse-everything path
// gives (the values bound, and so the text stored), for every record JSON.stringify can write (the
// writer's lines), for the writer's own lines (sanitized escapes included), and that any other
// text falls back to the parse.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { encodeEvent } from '../../src/audit/encode.js'
import { rowsOfJsonRecords, rowsOfRecords, rowsOfRecordsParsed } from '../../src/store/dialects/json-records.js'
import { AUDIT_JSON_COLUMNS, AUDIT_ROW_COLUMNS } from '../../src/store/index.js'
import { decision, mutation, orgId } from '../audit/fixtures.js'

const names = [...AUDIT_ROW_COLUMNS] as string[]
const jsonColumns = names.map((n) => (AUDIT_JSON_COLUMNS as readonly string[]).includes(n))

// Strings that need escapes (quotes, backslashes, control characters, lone surrogates, U+2028) and
// brackets that a scan must not count.
const text = fc.oneof(
  fc.string({ unit: 'binary' }),
  fc.string({ unit: fc.constantFrom('"', '\\', '{', '}', '[', ']', ',', ':', 'a', '\u0000', '\n', '\ud800', '\udc00', '\u2028', 'é', '😀') }),
)
const jsonValue = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, text, fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null), tie('array'), tie('object')),
  array: fc.array(tie('value'), { maxLength: 4 }),
  // Integer-like keys too: an object orders them first, which the text must already do.
  object: fc.dictionary(fc.oneof(text, fc.nat().map(String)), tie('value'), { maxKeys: 4 }),
})).value
// A record: some of the columns (in any order), an unknown key now and then, each with any value.
const column = fc.constantFrom(...names, 'not_a_column')
const record = fc.array(fc.tuple(column, jsonValue), { maxLength: 12 }).map((pairs) => Object.fromEntries(pairs))

describe('rowsOfJsonRecords', () => {
  it('gives the parsed rows for any array of records JSON.stringify writes', () => {
    fc.assert(fc.property(fc.array(record, { maxLength: 6 }), (records) => {
      const json = JSON.stringify(records)
      const scanned = rowsOfJsonRecords(json, names, jsonColumns)
      expect(scanned).toBeDefined()
      expect(scanned).toEqual(rowsOfRecordsParsed(json, names, jsonColumns))
    }), { numRuns: 2_000 })
  })

  it('gives the parsed rows for the writer\'s lines, sanitized ones included', () => {
    const org = orgId()
    const events = [
      decision(org),
      mutation(org),
      decision(org, { detail: { note: 'a "quoted" \\ path', nested: { deep: [1, { x: '}' }] }, '7': 'int key' } }),
      // Sanitized by the encoder: NUL and a lone surrogate in a text column and in a JSON column.
      decision(org, { path: '/a\u0000b\ud800', detail: { bad: 'x\ud800y', nul: '\u0000' } }),
      decision(org, { destination: 'ünïcødé.example', detail: { emoji: '😀', sep: '\u2028' } }),
    ]
    const lines = events.map((e) => {
      const r = encodeEvent(e)
      if (!r.ok) throw new Error(r.reason)
      return r.value.line
    })
    expect(lines.some((l) => l.includes('\\ufffd'))).toBe(true)
    const json = `[${lines.join(',')}]`
    const scanned = rowsOfJsonRecords(json, names, jsonColumns)
    expect(scanned).toBeDefined()
    expect(scanned).toEqual(rowsOfRecordsParsed(json, names, jsonColumns))
  })

  it('leaves text it does not expect to the parse: whitespace, an escaped key, anything not an array of records', () => {
    const cases = [
      '[ {"id":"a"} ]',
      '[{"id": "a", "detail": {"b": 1}}]',
      '[{"i\\u0064":"a"}]',
      '{"id":"a"}',
      '[1]',
      '[{"id":"a"}]x',
      '[{"latency_ms":-Infinity}]',
      '[{"latency_ms":NaN}]',
      '[{"latency_ms":Infinity}]',
    ]
    for (const json of cases) {
      expect(rowsOfJsonRecords(json, names, jsonColumns), json).toBeUndefined()
      let parsed: unknown
      try {
        parsed = rowsOfRecordsParsed(json, names, jsonColumns)
      } catch (err) {
        parsed = err
      }
      if (parsed instanceof Error) expect(() => rowsOfRecords(json, names, jsonColumns)).toThrow()
      else expect(rowsOfRecords(json, names, jsonColumns)).toEqual(parsed)
    }
    expect(rowsOfRecords('[]', names, jsonColumns)).toEqual([])
  })
})
