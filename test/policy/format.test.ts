import { describe, expect, it } from 'vitest'
import { CODES } from '../../src/policy/index.js'
import { formatGithub, formatSarif, formatText, toJsonReport, type LintReport } from '../../src/policy/format.js'
import { lintSources } from '../../src/policy/lint.js'

const bad = '- name: api\n  type: http\n  allow:\n    - domains: [api.example.com]\n      methods: [get]\n'
const warn = '- name: api\n  type: http\n  allow:\n    - domains: [api.example.com]\n      methods: [POST]\n'
const sources = new Map([
  ['policies/bad.yaml', bad],
  ['policies/warn.yaml', warn],
])

describe('lint output formats', () => {
  const report: LintReport = lintSources(sources)

  it('json has exactly the documented shape', () => {
    const json = toJsonReport(report)
    expect(json).toEqual({
      files: [
        {
          file: 'policies/bad.yaml',
          valid: false,
          diagnostics: [{ severity: 'error', code: 'invalid_method', message: expect.stringContaining('"get"'), path: '/0/allow/0/methods/0', line: 5, column: 17 }],
        },
        {
          file: 'policies/warn.yaml',
          valid: true,
          diagnostics: [{ severity: 'warning', code: 'unrestricted_write', message: expect.any(String), path: '/0/allow/0/methods', line: 5, column: 16 }],
        },
      ],
    })
  })

  it('text shows file:line:column, the source line and a caret', () => {
    const text = formatText(report, sources)
    const lines = text.split('\n')
    expect(lines[0]).toMatch(/^policies\/bad\.yaml:5:17: error invalid_method method "get"/)
    expect(lines[1]).toBe('        methods: [get]')
    expect(lines[2]).toBe('                  ^')
    expect(text).toContain('2 files checked: 1 error, 1 warning')
  })

  it('sarif is SARIF 2.1.0 with stable rule ids', () => {
    const sarif = JSON.parse(formatSarif(report))
    expect(sarif.version).toBe('2.1.0')
    const rules = sarif.runs[0].tool.driver.rules.map((r: { id: string }) => r.id)
    expect(rules).toEqual(Object.keys(CODES))
    const [r1, r2] = sarif.runs[0].results
    expect(r1).toMatchObject({ ruleId: 'invalid_method', ruleIndex: rules.indexOf('invalid_method'), level: 'error', locations: [{ physicalLocation: { artifactLocation: { uri: 'policies/bad.yaml' }, region: { startLine: 5, startColumn: 17 } } }] })
    expect(r2).toMatchObject({ ruleId: 'unrestricted_write', level: 'warning' })
  })

  it('github annotations escape properties and data', () => {
    const out = formatGithub({ files: [{ file: 'a,b:c.yaml', valid: false, diagnostics: [{ severity: 'error', code: 'x', message: '50% bad\nnext', path: '/0', line: 2, column: 3 }] }] }, (f) => `repo/${f}`)
    expect(out).toBe('::error file=repo/a%2Cb%3Ac.yaml,line=2,col=3,title=x::50%25 bad%0Anext (/0)\n')
  })
})
