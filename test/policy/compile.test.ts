import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { CODES, compilePolicy, compilePolicyCached } from '../../src/policy/index.js'
import { renderRulesDoc } from '../../src/policy/rules-doc.js'

const FIXTURES = path.join(import.meta.dirname, '../fixtures/caps')

describe('golden fixtures', () => {
  for (const f of readdirSync(path.join(FIXTURES, 'err')).filter((f) => f.endsWith('.yaml'))) {
    it(`err/${f} reports exactly its diagnostics`, () => {
      const res = compilePolicy(readFileSync(path.join(FIXTURES, 'err', f), 'utf8'))
      const expected = JSON.parse(readFileSync(path.join(FIXTURES, 'err', f.replace(/\.yaml$/, '.json')), 'utf8'))
      expect(res.ok).toBe(false)
      expect(res.diagnostics.map(({ severity, code, path, line, column }) => ({ severity, code, path, line, column }))).toEqual(expected)
    })
  }
  for (const f of readdirSync(path.join(FIXTURES, 'ok')).filter((f) => f.endsWith('.yaml'))) {
    it(`ok/${f} compiles without findings`, () => {
      const res = compilePolicy(readFileSync(path.join(FIXTURES, 'ok', f), 'utf8'))
      expect(res.diagnostics).toEqual([])
      expect(res.ok).toBe(true)
    })
  }
})

describe('rule by rule (docs/caps-rules.md examples)', () => {
  const docs = readFileSync(path.join(import.meta.dirname, '../../docs/caps-rules.md'), 'utf8')
  it('docs/caps-rules.md is generated from the catalogue (see src/policy/rules-doc.ts to regenerate)', () => {
    expect(docs).toBe(renderRulesDoc())
  })
  for (const [code, info] of Object.entries(CODES)) {
    it(`${code}: the bad example raises it, the good one is clean`, () => {
      expect(docs).toContain(`## ${code}`)
      if (code === 'document_too_large' || code === 'document_too_complex') return // exercised below
      const bad = compilePolicy(info.bad)
      const hit = bad.diagnostics.find((d) => d.code === code)
      expect(hit, JSON.stringify(bad.diagnostics)).toBeDefined()
      expect(hit!.severity).toBe(info.severity)
      expect(hit!.line).toBeGreaterThanOrEqual(1)
      expect(hit!.column).toBeGreaterThanOrEqual(1)
      const good = compilePolicy(info.good)
      expect(good.diagnostics.filter((d) => d.code === code || d.severity === 'error')).toEqual([])
    })
  }

  it('document_too_large and document_too_complex', () => {
    const large = compilePolicy('#'.repeat(1024 * 1024 + 10))
    expect(large.diagnostics.map((d) => d.code)).toEqual(['document_too_large'])
    let bomb = 'a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n'
    for (let i = 1; i < 12; i++) bomb += `a${i}: &a${i} [${Array(10).fill(`*a${i - 1}`).join(', ')}]\n`
    const res = compilePolicy(`- name: api\n  type: http\n  allow:\n    - domains: [a.example]\n      methods: [GET]\n      request_format: application/json\n      request_schema:\n        ${bomb.trimEnd().split('\n').join('\n        ')}\n`)
    expect(res.ok).toBe(false)
    expect(res.diagnostics.some((d) => d.code === 'document_too_complex')).toBe(true)
    const deep = compilePolicy('['.repeat(20000) + ']'.repeat(20000))
    expect(deep.ok).toBe(false)
  })
})

describe('compilePolicy', () => {
  const src = readFileSync(path.join(FIXTURES, 'ok/everything.yaml'), 'utf8')

  it('is deterministic and cached by content hash', () => {
    const a = compilePolicy(src)
    const b = compilePolicy(src)
    expect(a.ok && b.ok && a.policy.hash === b.policy.hash).toBe(true)
    expect(compilePolicyCached(src)).toBe(compilePolicyCached(src))
    expect(compilePolicyCached(src + '\n')).not.toBe(compilePolicyCached(src))
  })

  it('returns a frozen policy', () => {
    const res = compilePolicy(src)
    if (!res.ok) throw new Error('expected ok')
    expect(Object.isFrozen(res.policy)).toBe(true)
    expect(Object.isFrozen(res.policy.capabilities)).toBe(true)
    expect(Object.isFrozen(res.policy.counters('everything')[0])).toBe(true)
    expect(res.policy.capabilities[0].rules[0].domains).toEqual(['*.example.com', 'api.example.com', '**.internal.example'])
  })

  it('reports all errors of a file, sorted by position', () => {
    const res = compilePolicy(readFileSync(path.join(FIXTURES, 'err/many-errors.yaml'), 'utf8'))
    expect(res.diagnostics.length).toBeGreaterThanOrEqual(8)
    const lines = res.diagnostics.map((d) => d.line)
    expect(lines).toEqual([...lines].sort((a, b) => a - b))
  })

  it('rejects CEL results of the wrong type at every site', () => {
    const base = (t: string) => `- name: a\n  type: http\n  allow:\n    - name: r\n      domains: [a.example]\n      methods: [GET]\n  transforms:\n${t}`
    const cases: [string, string][] = [
      [`    - header: {name: X, action: set, value: '1'}\n`, 'must produce string'],
      [`    - query: {key: k, action: set, value: 'true'}\n`, 'must produce string'],
      [`    - path: {action: prefix, value: '["a"]'}\n`, 'must produce string'],
    ]
    for (const [t, msg] of cases) {
      const res = compilePolicy(base(t))
      expect(res.diagnostics.find((d) => d.code === 'cel_result_type')?.message).toContain(msg)
    }
  })

  it('rejects counter values that are not numbers and response.body outside single_document', () => {
    const doc = (c: string) =>
      `- name: a\n  type: http\n  allow:\n    - domains: [a.example]\n      methods: [GET]\n  budgets:\n    counters:\n      - name: c\n        source: response\n        status_codes: ["2xx"]\n        accumulator: max\n        workspace: {max: 5}\n${c}`
    expect(compilePolicy(doc(`        value: '"x"'\n`)).diagnostics.map((d) => d.code)).toContain('cel_result_type')
    expect(compilePolicy(doc(`        value: response.body.n\n`)).diagnostics.map((d) => d.message)).toContain('undeclared reference: response.body')
    expect(compilePolicy(doc(`        value: event.data.n\n`)).diagnostics.map((d) => d.message)).toContain('undeclared reference: event')
    expect(compilePolicy(doc(`        value: size(response.headers)\n`)).ok).toBe(true)
  })
})

describe('request_schema', () => {
  const rule = (schema: string) => `- name: a\n  type: http\n  allow:\n    - domains: [a.example]\n      methods: [POST]\n      paths: [/x]\n      request_format: application/json\n      request_schema:\n${schema}`
  it('flags duplicate keys inside a YAML schema with their path', () => {
    const res = compilePolicy(rule('        type: object\n        properties:\n          a: {type: string}\n          a: {type: integer}\n'))
    expect(res.diagnostics.map((d) => [d.code, d.path, d.line, d.column])).toEqual([['duplicate_key', '/0/allow/0/request_schema/properties/a', 12, 11]])
  })
  it('accepts a JSON literal and internal $ref, rejects external and unknown drafts', () => {
    expect(compilePolicy(rule(`        '{"$defs": {"n": {"type": "integer"}}, "properties": {"n": {"$ref": "#/$defs/n"}}}'\n`)).ok).toBe(true)
    expect(compilePolicy(rule('        {properties: {n: {$ref: "other.json#/n"}}}\n')).diagnostics.map((d) => d.code)).toEqual(['external_ref'])
    expect(compilePolicy(rule('        {$schema: "http://json-schema.org/draft-04/schema#"}\n')).diagnostics.map((d) => d.code)).toEqual(['invalid_schema'])
  })
})

describe('CEL fields written as YAML numbers or booleans', () => {
  it('are read as the CEL literal text', () => {
    const res = compilePolicy(`- name: a
  type: http
  allow:
    - {domains: [a.example], methods: [GET], match: {expr: true}}
  budgets:
    counters:
      - {name: prs, source: response, status_codes: [201], accumulator: sum, value: 1, task: {max: 3}}
`)
    if (!res.ok) throw new Error(JSON.stringify(res.diagnostics))
    expect(res.policy.counters('a')[0].fromResponseHeaders({ status: 201, headers: {}, size: 0 })).toEqual({ value: 1 })
    expect(compilePolicy(`- {name: a, type: http, allow: [{domains: [a.example], methods: [GET], match: {expr: 1}}]}`).diagnostics.map((d) => d.code)).toEqual(['cel_result_type'])
  })
})

describe('Accept-Encoding pin', () => {
  const doc = (appliesTo: string) => `- name: a
  type: http
  allow:
    - {name: one, domains: [a.example], methods: [GET]}
    - {name: two, domains: [b.example], methods: [GET]}
  transforms:
    - {${appliesTo}header: {name: accept-encoding, action: set, value: "'identity'"}}
  budgets:
    counters:
      - {name: out, source: response.bytes, status_codes: [2xx], workspace: {max: 10}}
`
  it('must reach every rule the counter meters', () => {
    expect(compilePolicy(doc('')).ok).toBe(true)
    expect(compilePolicy(doc('applies_to: [one, two], ')).ok).toBe(true)
    const partial = compilePolicy(doc('applies_to: [one], '))
    expect(partial.diagnostics.map((d) => [d.code, d.path])).toEqual([['accept_encoding_required', '/0/budgets/counters/0']])
    expect(partial.diagnostics[0].message).toContain('allow rule "two"')
  })
})

describe('int64 bounds', () => {
  const doc = (max: string) => `- {name: a, type: http, allow: [{domains: [a.example], methods: [GET]}], budgets: {counters: [{name: c, source: request.count, workspace: {max: ${max}}}]}}`
  it('accepts 2^63-1 and rejects 2^63, negatives and fractions', () => {
    expect(compilePolicy(doc('9223372036854775807')).ok).toBe(true)
    for (const bad of ['9223372036854775808', '-1', '1.5', '"10"']) expect(compilePolicy(doc(bad)).diagnostics.map((d) => d.code)).toContain('invalid_number')
  })
})
