import { spawnSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { describe, expect, it } from 'vitest'

// Runs the built binary (npm test builds first; locally: npm run build).
const ROOT = path.join(import.meta.dirname, '../..')
const BIN = path.join(ROOT, 'bin/run.js')

function corral(args: string[], input?: string) {
  const r = spawnSync(process.execPath, [BIN, ...args], { cwd: ROOT, input, encoding: 'utf8', env: { ...process.env, NO_COLOR: '1', GITHUB_WORKSPACE: ROOT } })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

const tmp = mkdtempSync(path.join(tmpdir(), 'corral-caps-'))
const bad = path.join(tmp, 'bad.yaml')
writeFileSync(bad, '- name: api\n  type: http\n  allow:\n    - domains: [api.example.com]\n      methods: [get]\n      paths: [v1]\n')
const EXAMPLES = ['examples/llm-provider.yaml', 'examples/package-registry.yaml', 'examples/git-host.yaml', 'examples/mcp-server.yaml']

describe('corral caps lint', () => {
  it('exits 0 on the examples', () => {
    const r = corral(['caps', 'lint', ...EXAMPLES])
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    expect(r.stdout).toContain('4 files checked: 0 errors, 0 warnings')
  })

  it('exits 1 with every error of the file, in each format', () => {
    const text = corral(['caps', 'lint', bad])
    expect(text.code).toBe(1)
    expect(text.stdout).toContain(`${bad}:5:17: error invalid_method`)
    expect(text.stdout).toContain(`${bad}:6:15: error invalid_path`)

    for (const args of [['--json'], ['--format', 'json']]) {
      const json = corral(['caps', 'lint', bad, ...args])
      expect(json.code).toBe(1)
      const parsed = JSON.parse(json.stdout)
      expect(parsed.files[0]).toMatchObject({ file: bad, valid: false })
      expect(parsed.files[0].diagnostics.map((d: { code: string; path: string }) => [d.code, d.path])).toEqual([
        ['invalid_method', '/0/allow/0/methods/0'],
        ['invalid_path', '/0/allow/0/paths/0'],
      ])
    }

    const sarif = corral(['caps', 'lint', bad, '--format', 'sarif'])
    expect(sarif.code).toBe(1)
    expect(JSON.parse(sarif.stdout).runs[0].results).toHaveLength(2)

    const gh = corral(['caps', 'lint', 'examples/git-host.yaml', bad, '--format', 'github'])
    expect(gh.code).toBe(1)
    expect(gh.stdout).toMatch(/^::error file=.*bad\.yaml,line=5,col=17,title=invalid_method::/m)
  })

  it('valid --json output when clean', () => {
    const r = corral(['caps', 'lint', 'examples/git-host.yaml', '--json'])
    expect(r.code).toBe(0)
    expect(JSON.parse(r.stdout)).toEqual({ files: [{ file: 'examples/git-host.yaml', valid: true, diagnostics: [] }] })
  })

  it('reads standard input with "-"', () => {
    const r = corral(['caps', 'lint', '-'], '\u0000\u0001 binary junk')
    expect(r.code).toBe(1)
    expect(r.stdout).toMatch(/^-:1:\d+: error /)
    expect(r.stderr).not.toMatch(/at .*\.js/)
  })

  it('exits 2 on unreadable files and bad flags', () => {
    const missing = corral(['caps', 'lint', path.join(tmp, 'nope.yaml')])
    expect(missing.code).toBe(2)
    expect(missing.stderr).toContain('no such file')
    expect(corral(['caps', 'lint', bad, '--format', 'xml']).code).toBe(2)
  })
})

describe('corral caps test', () => {
  for (const name of ['llm-provider', 'package-registry', 'git-host', 'mcp-server']) {
    it(`passes examples/cases/${name}.yaml`, () => {
      const r = corral(['caps', 'test', `examples/${name}.yaml`, `examples/cases/${name}.yaml`])
      expect(r.code, r.stdout + r.stderr).toBe(0)
      expect(r.stdout).toMatch(/\d+ passed, 0 failed/)
    })
  }

  it('exits 1 and shows a diff for a failing case', () => {
    const cases = path.join(tmp, 'cases.yaml')
    writeFileSync(cases, '- name: wrong\n  request: {method: GET, url: "https://registry.npmjs.org/x"}\n  expect: {decision: deny}\n')
    const r = corral(['caps', 'test', 'examples/package-registry.yaml', cases])
    expect(r.code).toBe(1)
    expect(r.stdout).toContain('FAIL wrong')
    expect(r.stdout).toContain('- expected "deny"')
    expect(r.stdout).toContain('+ actual   "allow"')
    const j = corral(['caps', 'test', 'examples/package-registry.yaml', cases, '--json'])
    expect(j.code).toBe(1)
    expect(JSON.parse(j.stdout)).toMatchObject({ passed: 0, failed: 1, cases: [{ name: 'wrong', passed: false, failures: [{ field: 'decision', expected: 'deny', actual: 'allow' }] }] })
  })

  it('exits 1 when the policy does not compile, 2 when the cases file is malformed', () => {
    const r = corral(['caps', 'test', bad, 'examples/cases/git-host.yaml'])
    expect(r.code).toBe(1)
    expect(r.stderr).toContain('invalid_method')
    const cases = path.join(tmp, 'broken-cases.yaml')
    writeFileSync(cases, 'nope: 1\n')
    expect(corral(['caps', 'test', 'examples/git-host.yaml', cases]).code).toBe(2)
  })
})
