import { readFileSync } from 'node:fs'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { parseCases, runCases } from '../../src/policy/cases.js'
import { compilePolicy } from '../../src/policy/index.js'

const EXAMPLES = path.join(import.meta.dirname, '../../examples')

describe('examples/', () => {
  for (const name of ['llm-provider', 'package-registry', 'git-host', 'mcp-server']) {
    it(`${name}.yaml lints clean and its cases pass`, () => {
      const res = compilePolicy(readFileSync(path.join(EXAMPLES, `${name}.yaml`), 'utf8'))
      expect(res.diagnostics).toEqual([])
      if (!res.ok) return
      const report = runCases(res.policy, parseCases(readFileSync(path.join(EXAMPLES, 'cases', `${name}.yaml`), 'utf8')))
      expect(report.cases.filter((c) => !c.passed)).toEqual([])
      expect(report.passed).toBeGreaterThanOrEqual(5)
    })
  }
})

// The minimal policy of each agent kind (docs/agent.md "Agent kinds"), with its cases.
describe('examples/agents/', () => {
  for (const kind of ['claude-code', 'gemini-cli', 'codex', 'opencode']) {
    it(`agents/${kind}.yaml lints clean and its cases pass`, () => {
      const res = compilePolicy(readFileSync(path.join(EXAMPLES, 'agents', `${kind}.yaml`), 'utf8'))
      expect(res.diagnostics).toEqual([])
      if (!res.ok) return
      const report = runCases(res.policy, parseCases(readFileSync(path.join(EXAMPLES, 'cases', `agents-${kind}.yaml`), 'utf8')))
      expect(report.cases.filter((c) => !c.passed)).toEqual([])
      expect(report.passed).toBeGreaterThanOrEqual(5)
    })
  }
})

describe('caps test cases', () => {
  const policy = (() => {
    const res = compilePolicy(readFileSync(path.join(EXAMPLES, 'git-host.yaml'), 'utf8'))
    if (!res.ok) throw new Error('example does not compile')
    return res.policy
  })()

  it('reports a diff for every mismatching field', () => {
    const cases = parseCases(`
- name: wrong on purpose
  request: {method: POST, url: "https://api.github.com/repos/a/b/pulls", body: {title: t, head: h, base: main, draft: true}}
  response: {status: 201, body: {}}
  expect:
    decision: allow
    rule: api-read
    headers: {x-github-api-version: "1999", user-agent: null}
    body: {title: t}
    debits: {api-calls: 2}
`)
    const [c] = runCases(policy, cases).cases
    expect(c.passed).toBe(false)
    expect(c.failures).toEqual([
      { field: 'rule', expected: 'api-read', actual: 'open-pr' },
      { field: 'headers.x-github-api-version', expected: '1999', actual: '2022-11-28' },
      { field: 'headers.user-agent', expected: null, actual: 'corral-workspace/' },
      { field: 'body', expected: { title: 't' }, actual: { title: '[agent] t', head: 'h', base: 'main', draft: true } },
      { field: 'debits', expected: { 'api-calls': 2 }, actual: { 'api-calls': 1, 'pull-requests': 1 } },
    ])
  })

  it('rejects malformed cases files with a clear message', () => {
    expect(() => parseCases('{')).toThrow(/not valid YAML/)
    expect(() => parseCases('a: 1')).toThrow(/list of cases/)
    expect(() => parseCases('- request: {url: "/relative"}\n  expect: {decision: allow}')).toThrow(/absolute URL/)
    expect(() => parseCases('- request: {url: "https://a.example/"}\n  expect: {decisoin: allow}')).toThrow(/unknown expect key "decisoin"/)
  })
})
