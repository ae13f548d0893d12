// POST /v1/caps/lint and /v1/caps/test (docs/api.md "Policy checks"): the same compiler and case
// runner as `corral caps lint` / `caps test`, over HTTP for the console's policy editor. Any caller
// of the org (a read_only key too); nothing stored or audited; every refusal is the envelope.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { compilePolicy } from '../../src/policy/index.js'
import { createHarness, type Harness } from './harness.js'

const EXAMPLES = join(import.meta.dirname, '../../examples')
const LLM = readFileSync(join(EXAMPLES, 'llm-provider.yaml'), 'utf8')
const LLM_CASES = readFileSync(join(EXAMPLES, 'cases/llm-provider.yaml'), 'utf8')

describe('caps routes', () => {
  let h: Harness
  let readOnly: string
  beforeAll(async () => {
    h = await createHarness()
    const { orgId } = await h.newOrg()
    readOnly = (await h.key(orgId, 'read_only')).value
  })
  afterAll(() => h.close())

  it('lints a valid policy: no diagnostics, its counters with their ceilings', async () => {
    const res = await h.inject('POST', '/v1/caps/lint', { token: readOnly, body: { capabilities: LLM } })
    expect(res.status).toBe(200)
    expect(res.body.valid).toBe(true)
    expect(res.body.diagnostics.filter((d: { severity: string }) => d.severity === 'error')).toEqual([])
    const compiled = compilePolicy(LLM)
    expect(compiled.ok).toBe(true)
    const expected = compiled.ok ? compiled.policy.capabilities.flatMap((c) => c.counters.map((k) => ({ capability: c.name, name: k.name }))) : []
    expect(res.body.counters.map((c: { capability: string; name: string }) => ({ capability: c.capability, name: c.name }))).toEqual(expected)
    expect(res.body.counters.length).toBeGreaterThan(0)
    expect(res.body.counters[0]).toHaveProperty('source')
  })

  it('answers the compiler diagnostics of a broken policy at their line and column', async () => {
    const broken = '- name: api\n  type: http\n  allow:\n    - domains: [api.example.com]\n      methods: [FETCH]\n'
    const res = await h.inject('POST', '/v1/caps/lint', { token: readOnly, body: { capabilities: broken } })
    expect(res.status).toBe(200)
    expect(res.body.valid).toBe(false)
    const direct = compilePolicy(broken)
    expect(res.body.diagnostics).toEqual(direct.diagnostics.map((d) => ({ severity: d.severity, code: d.code, message: d.message, path: d.path, line: d.line, column: d.column })))
    expect(res.body.diagnostics[0].line).toBe(5)
    expect(res.body.counters).toEqual([])
  })

  it('runs caps test cases against a policy', async () => {
    const res = await h.inject('POST', '/v1/caps/test', { token: readOnly, body: { capabilities: LLM, cases: LLM_CASES } })
    expect(res.status).toBe(200)
    expect(res.body.failed).toBe(0)
    expect(res.body.passed).toBe(res.body.cases.length)
    const failing = LLM_CASES.replace('decision: allow', 'decision: deny')
    const failed = await h.inject('POST', '/v1/caps/test', { token: readOnly, body: { capabilities: LLM, cases: failing } })
    expect(failed.body.failed).toBe(1)
    expect(failed.body.cases.find((c: { passed: boolean }) => !c.passed).failures[0]).toMatchObject({ field: 'decision', expected: 'deny', actual: 'allow' })
  })

  it('refuses with the envelope: no credential, a bad body, a policy that does not compile, a bad cases file', async () => {
    const anonymous = await h.inject('POST', '/v1/caps/lint', { body: { capabilities: LLM } })
    expect(anonymous.status).toBe(401)
    expect(anonymous.body.error.code).toBe('unauthenticated')
    const missing = await h.inject('POST', '/v1/caps/lint', { token: readOnly, body: {} })
    expect(missing.status).toBe(400)
    expect(missing.body.error).toMatchObject({ code: 'validation_error' })
    const extra = await h.inject('POST', '/v1/caps/lint', { token: readOnly, body: { capabilities: LLM, more: 1 } })
    expect(extra.status).toBe(400)
    const noCompile = await h.inject('POST', '/v1/caps/test', { token: readOnly, body: { capabilities: '- name: x\n', cases: LLM_CASES } })
    expect(noCompile.status).toBe(400)
    expect(noCompile.body.error.details.fields).toHaveProperty('capabilities')
    for (const cases of ['{{', 'cases: 3', '- request: {url: "not a url"}\n  expect: {decision: allow}\n', '- request: {url: "https://x.example/", method: 7}\n  expect: {decision: allow}\n']) {
      const bad = await h.inject('POST', '/v1/caps/test', { token: readOnly, body: { capabilities: LLM, cases } })
      expect(bad.status, `${cases} → ${bad.raw}`).toBe(400)
      expect(bad.body.error.code).toBe('validation_error')
      expect(bad.body.error.details.fields).toHaveProperty('cases')
    }
  })
})
