// request_schema compilation with ajv. Draft 2020-12 by default; `$schema` may pick 2019-09 or
// draft-07. Only references inside the schema itself are allowed: an external `$ref` would make
// a policy depend on the network (or on whatever a resolver returns) at save time.
// Validators are cached by the schema's canonical JSON, so equal schemas share one function.

import { createRequire } from 'node:module'
import type { ErrorObject, ValidateFunction } from 'ajv'
import { META_AJV_VERSION, META_VALIDATORS } from './json-schema-meta.js'

const require = createRequire(import.meta.url)
const RE2 = require('re2') as new (pattern: string, flags?: string) => RegExp

/** ajv's `code.regExp` hook: (source, flags) → an object with test(); RE2 provides it. */
function re2RegExp(source: string, flags: string): RegExp {
  return new RE2(source, flags)
}
re2RegExp.code = 'new require("re2")'

export type AjvLike = {
  compile(schema: object): ValidateFunction
  getSchema(keyRef: string): ValidateFunction | undefined
  validateSchema(schema: object): boolean | Promise<unknown>
  errors?: ErrorObject[] | null
  errorsText(errors?: ErrorObject[] | null): string
  readonly schemas: Record<string, { validate?: ValidateFunction } | undefined>
}

const DRAFTS = {
  'https://json-schema.org/draft/2020-12/schema': '2020',
  'https://json-schema.org/draft/2019-09/schema': '2019',
  'http://json-schema.org/draft-07/schema': '07',
} as const
export type Draft = (typeof DRAFTS)[keyof typeof DRAFTS]
export const META_SCHEMA_IDS = Object.fromEntries(Object.entries(DRAFTS).map(([id, d]) => [d, id])) as Record<Draft, string>

/** A fresh ajv instance for a draft, with formats; `source` keeps generated code (for standalone output). */
export function newAjv(draft: Draft, opts: { source?: boolean } = {}): AjvLike {
  // ajv ships CommonJS; createRequire keeps the import simple under NodeNext.
  const mod = draft === '2020' ? require('ajv/dist/2020') : draft === '2019' ? require('ajv/dist/2019') : require('ajv')
  const Ctor = (mod.default ?? mod) as new (opts: object) => AjvLike
  // `pattern` and `patternProperties` run on request bodies on the hot path: evaluate them with RE2
  // (linear time) instead of backtracking JS RegExp; a pattern RE2 cannot compile is a save-time error.
  const a = new Ctor({ strict: false, allErrors: false, validateSchema: true, loadSchema: undefined, addUsedSchema: false, code: { regExp: re2RegExp, ...(opts.source ? { source: true } : {}) } })
  const formats = require('ajv-formats')
  ;(formats.default ?? formats)(a)
  return a
}

/**
 * Every schema is checked against its draft's meta-schema, and ajv compiles that meta-schema on
 * first use: ~100 ms, most of a `caps lint` run. json-schema-meta.ts holds the same validators as
 * ajv standalone code, generated with these very options (json-schema-meta.gen.ts); installing one
 * as the meta-schema's compiled function leaves ajv's own checking and messages unchanged.
 * test/policy/json-schema-meta.test.ts fails when the generated code is stale and compares
 * verdicts and messages with ajv's own meta-schema compilation. With another ajv version
 * installed, ajv compiles the meta-schema itself as before.
 */
function installMetaValidator(a: AjvLike, draft: Draft): void {
  if (require('ajv/package.json').version !== META_AJV_VERSION) return
  const env = a.schemas[META_SCHEMA_IDS[draft]]
  if (!env || env.validate) return
  const module = { exports: {} as { default?: ValidateFunction } }
  // Standalone code is CommonJS that requires ajv runtime helpers (and RE2, via code.regExp).
  new Function('module', 'exports', 'require', META_VALIDATORS[draft])(module, module.exports, require)
  if (typeof module.exports.default === 'function') env.validate = module.exports.default
}

const instances = new Map<Draft, AjvLike>()
function ajvFor(draft: Draft): AjvLike {
  let a = instances.get(draft)
  if (a) return a
  a = newAjv(draft)
  installMetaValidator(a, draft)
  instances.set(draft, a)
  return a
}

export type SchemaCompileResult = { ok: true; validate: ValidateFunction } | { ok: false; code: 'invalid_schema' | 'external_ref'; message: string }

function externalRef(schema: unknown, depth = 0): string | undefined {
  if (depth > 64 || !schema || typeof schema !== 'object') return undefined
  for (const [k, v] of Object.entries(schema)) {
    if ((k === '$ref' || k === '$dynamicRef' || k === '$recursiveRef') && typeof v === 'string' && !v.startsWith('#')) return v
    const found = externalRef(v, depth + 1)
    if (found) return found
  }
  return undefined
}

const cache = new Map<string, ValidateFunction>()

export function compileSchema(schema: unknown): SchemaCompileResult {
  if (typeof schema === 'boolean') schema = schema ? {} : { not: {} }
  if (!schema || typeof schema !== 'object' || Array.isArray(schema)) return { ok: false, code: 'invalid_schema', message: 'request_schema must be a JSON Schema object' }
  const ext = externalRef(schema)
  if (ext) return { ok: false, code: 'external_ref', message: `external $ref "${ext}" is not allowed; only references inside the schema (#/…) work` }
  const declared = (schema as { $schema?: unknown }).$schema
  let draft: Draft = '2020'
  if (declared !== undefined) {
    const key = String(declared).replace(/#$/, '')
    const d = DRAFTS[key as keyof typeof DRAFTS]
    if (!d) return { ok: false, code: 'invalid_schema', message: `unsupported $schema "${String(declared)}"; use draft 2020-12, 2019-09 or draft-07` }
    draft = d
  }
  const canonical = `${draft}:${JSON.stringify(schema)}`
  const hit = cache.get(canonical)
  if (hit) return { ok: true, validate: hit }
  const ajv = ajvFor(draft)
  try {
    const validate = ajv.compile(structuredClone(schema) as object)
    cache.set(canonical, validate)
    return { ok: true, validate }
  } catch (e) {
    return { ok: false, code: 'invalid_schema', message: `invalid JSON Schema: ${(e as Error).message.split('\n')[0]}` }
  }
}

/** Short, stable summaries of ajv errors for deny details (at most five). */
export function summarizeErrors(errors: readonly ErrorObject[] | null | undefined): string[] {
  return (errors ?? []).slice(0, 5).map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`)
}
