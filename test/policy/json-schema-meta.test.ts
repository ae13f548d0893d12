import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'
import { compileSchema, newAjv, type Draft } from '../../src/policy/json-schema.js'
import { renderMetaValidators } from '../../src/policy/json-schema-meta.gen.js'

const require = createRequire(import.meta.url)

// Schemas that pass and fail each draft's meta-schema in different ways (types, enums, anyOf
// branches, numbers, nested subschemas, $defs/$ref, dynamic and recursive anchors).
const SCHEMAS: unknown[] = [
  {},
  true,
  false,
  { type: 'object', required: ['a'], properties: { a: { type: 'string', maxLength: 5 } } },
  { type: 'strin' },
  { type: ['string', 'nul'] },
  { required: 'x' },
  { required: ['a', 'a'] },
  { properties: { a: { minLength: -1 } } },
  { properties: { a: { maxItems: 1.5 } } },
  { items: [{ type: 'string' }] },
  { prefixItems: [{ type: 'string' }, { type: 'bogus' }] },
  { $defs: { n: { type: 'integer', minimum: 0 } }, properties: { a: { $ref: '#/$defs/n' } } },
  { definitions: { n: { type: 7 } } },
  { $id: 'x y' },
  { $anchor: '1bad' },
  { $dynamicAnchor: 'meta', type: 'object', additionalProperties: { $dynamicRef: '#meta' } },
  { enum: 'a' },
  { const: null, multipleOf: 0 },
  { pattern: 5 },
  { pattern: '^[a-z]+$' },
  { format: 'email', type: 'string' },
  { dependentRequired: { a: 'b' } },
  { unevaluatedProperties: { type: 3 } },
  { if: { type: 'string' }, then: { minLength: 'x' } },
  { allOf: [] },
  { anyOf: [{ type: 'string' }, { oneOf: 'x' }] },
  { properties: { deep: { properties: { deeper: { items: { properties: { x: { type: 'nope' } } } } } } } },
  { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object' },
  { $schema: 'https://json-schema.org/draft/2020-12/schema#', type: 'wrong' },
  { $schema: 'https://json-schema.org/draft/2019-09/schema', type: 'object', $recursiveAnchor: true },
  { $schema: 'https://json-schema.org/draft/2019-09/schema', type: 'foo' },
  { $schema: 'https://json-schema.org/draft/2019-09/schema', items: [{ type: 'string' }], additionalItems: { minLength: -2 } },
  { $schema: 'https://json-schema.org/draft/2019-09/schema', dependentSchemas: { a: 5 } },
  { $schema: 'http://json-schema.org/draft-07/schema#', type: 'foo' },
  { $schema: 'http://json-schema.org/draft-07/schema#', dependencies: { a: 3 } },
  { $schema: 'http://json-schema.org/draft-07/schema', definitions: { a: { exclusiveMinimum: true } } },
  { $schema: 'http://json-schema.org/draft-07/schema', items: { type: 'string' }, maxLength: 3 },
]

const DRAFT_OF: Record<string, Draft> = {
  'https://json-schema.org/draft/2019-09/schema': '2019',
  'http://json-schema.org/draft-07/schema': '07',
}

/** What ajv says about a schema when it compiles the meta-schema itself (no standalone code). */
function reference(schema: unknown): string {
  const s = (typeof schema === 'boolean' ? (schema ? {} : { not: {} }) : schema) as { $schema?: string }
  const draft = DRAFT_OF[String(s.$schema ?? '').replace(/#$/, '')] ?? '2020'
  try {
    newAjv(draft).compile(structuredClone(s))
    return 'ok'
  } catch (e) {
    return `invalid JSON Schema: ${(e as Error).message.split('\n')[0]}`
  }
}

describe('precompiled meta-schema validators', () => {
  it('src/policy/json-schema-meta.ts is current (see json-schema-meta.gen.ts to regenerate)', () => {
    const file = readFileSync(new URL('../../src/policy/json-schema-meta.ts', import.meta.url), 'utf8')
    expect(file).toBe(renderMetaValidators())
  })

  it('gives the verdicts and messages of ajv compiling the meta-schemas itself, without compiling them', () => {
    const core = require('ajv/dist/core').default.prototype as { _compileMetaSchema(sch: unknown): void }
    const original = core._compileMetaSchema
    let metaCompiles = 0
    core._compileMetaSchema = function (this: unknown, sch: unknown) {
      metaCompiles++
      return original.call(this, sch)
    }
    try {
      const ours = SCHEMAS.map((s) => {
        const r = compileSchema(structuredClone(s))
        return r.ok ? 'ok' : r.message
      })
      expect(metaCompiles).toBe(0)
      expect(ours).toEqual(SCHEMAS.map(reference))
      // The corpus exercises both outcomes for each draft.
      expect(ours.filter((m) => m === 'ok').length).toBeGreaterThan(5)
      expect(ours.filter((m) => m.includes('schema is invalid')).length).toBeGreaterThan(15)
    } finally {
      core._compileMetaSchema = original
    }
  })
})
