// Rows as either dialect stores them, with hostile values, for the suites that check a read path's
// leaf bytes against the API row's: any well-formed text (quotes, backslashes, control characters,
// U+2028, astral and combining characters), timestamps with time zones, integers at the column's
// limits, and JSON columns with unicode keys, big and tiny numbers, nulls and nesting.
import fc from 'fast-check'
import { AUDIT_INT_COLUMNS, AUDIT_JSON_COLUMNS, AUDIT_TEXT_COLUMNS } from '../../../src/store/index.js'

/** Text either dialect stores as it is (PostgreSQL refuses NUL and lone surrogates; the writer replaces them the same way). */
const storable = (s: string) => s.toWellFormed().replaceAll('\0', '\uFFFD')
const nasty = ['"', '\\', '\\u0000', '\u2028\u2029', '\u007f', '😀', 'e\u0301', '\r\n\t\b\f\u001f', '</script>', "'; DROP TABLE audit_events; --", ' ', '']
const text = fc.oneof(fc.string({ unit: 'binary', maxLength: 24 }).map(storable), fc.constantFrom(...nasty))
const number = fc.oneof(
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
  fc.constantFrom(1e21, 2 ** 53 + 2, -(2 ** 63), 1.7976931348623157e308, 5e-324, 1e-7, 0.1, -0, 123456789.123456789),
)
const json: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, fc.constant(null), fc.boolean(), number, text, tie('array'), tie('object')),
  array: fc.array(tie('value'), { maxLength: 4 }),
  object: fc.dictionary(text, tie('value'), { maxKeys: 5 }),
})).value
// RFC 3339 with a zone: Z, z-less offsets, fractions of any length.
const timestamp = fc.tuple(fc.integer({ min: 0, max: 4_102_444_800_000 }), fc.constantFrom('Z', '+00:00', '-00:00', '+05:30', '-12:00', '+14:00'), fc.constantFrom('', '.1', '.123', '.123456', '.123456789'))
  .map(([ms, zone, frac]) => `${new Date(ms).toISOString().slice(0, 19)}${frac}${zone}`)
const int = fc.oneof(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), fc.constantFrom(0, -(2 ** 31), 2 ** 31 - 1))

export const hostile = fc.record({
  user_id: text, timestamp, event_type: text, category: text, actor: text,
  ...Object.fromEntries(AUDIT_TEXT_COLUMNS.map((c) => [c, fc.option(text)])),
  ...Object.fromEntries(AUDIT_INT_COLUMNS.map((c) => [c, fc.option(int)])),
  // A JSON column holds any JSON value but a bare string (corral writes none; the API and the
  // encoder read a string as SQLite's text of the value, so such a row reads as changed on both).
  ...Object.fromEntries(AUDIT_JSON_COLUMNS.map((c) => [c, fc.option(json.filter((v) => typeof v !== 'string'))])),
}) as fc.Arbitrary<Record<string, unknown>>
