import { readFileSync } from 'node:fs'
import path from 'node:path'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { CODES, compilePolicy } from '../../src/policy/index.js'

// Any input gets diagnostics: never a throw, never a hang, every diagnostic well-formed.
function checkTotal(source: string): void {
  const res = compilePolicy(source)
  const lines = source.split(/\r\n|\r|\n/).length
  for (const d of res.diagnostics) {
    expect(d.code in CODES, d.code).toBe(true)
    expect(['error', 'warning']).toContain(d.severity)
    expect(d.path === '' || d.path.startsWith('/')).toBe(true)
    expect(Number.isInteger(d.line) && d.line >= 1 && d.line <= lines + 1).toBe(true)
    expect(Number.isInteger(d.column) && d.column >= 1).toBe(true)
    expect(typeof d.message).toBe('string')
  }
  if (!res.ok) expect(res.diagnostics.some((d) => d.severity === 'error')).toBe(true)
}

const seeds = [
  ...Object.values(CODES).flatMap((c) => [c.bad, c.good]),
  ...['llm-provider', 'package-registry', 'git-host', 'mcp-server'].map((n) => readFileSync(path.join(import.meta.dirname, `../../examples/${n}.yaml`), 'utf8')),
  readFileSync(path.join(import.meta.dirname, '../fixtures/caps/ok/everything.yaml'), 'utf8'),
]

// YAML-shaped values that hit the reader's type checks.
const scalar = fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant(null), fc.double(), fc.constantFrom('GET', 'http', 'response', 'sse', '2xx', '*', '**', '_x', 'request.body.x', 'secrets["a"]'))
const keys = fc.constantFrom('name', 'type', 'allow', 'domains', 'methods', 'paths', 'match', 'expr', 'transforms', 'header', 'body', 'auth', 'budgets', 'counters', 'source', 'value', 'framing', 'status_codes', 'workspace', 'max', 'ttl', 'request_schema', '$ref', 'x', 'mcp', 'tools', 'input_schema', 'when', 'resources', 'uri', 'prompts', 'default')
const value: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  v: fc.oneof({ depthSize: 'small' }, scalar, fc.array(tie('v'), { maxLength: 4 }), fc.dictionary(keys, tie('v'), { maxKeys: 5 })),
})).v

describe('fuzz: caps lint never throws', () => {
  it('generated YAML-ish documents', () => {
    fc.assert(fc.property(fc.array(value, { maxLength: 4 }), (doc) => checkTotal(JSON.stringify(doc))), { numRuns: 300 })
  })

  it('mutated real documents (byte flips, deletions, insertions, truncation)', () => {
    const mutation = fc.record({
      seed: fc.integer({ min: 0, max: seeds.length - 1 }),
      edits: fc.array(fc.record({ at: fc.nat(), del: fc.nat({ max: 8 }), ins: fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom(':', '- ', '  ', '\n', '[', '{', '&a', '*a', '"', "'", '#', '\t', '\u0000', '---\n')) }), { maxLength: 6 }),
    })
    fc.assert(
      fc.property(mutation, ({ seed, edits }) => {
        let s = seeds[seed]
        for (const e of edits) {
          const at = e.at % (s.length + 1)
          s = s.slice(0, at) + e.ins + s.slice(at + e.del)
        }
        checkTotal(s)
      }),
      { numRuns: 400 },
    )
  })

  it('binary, empty and whitespace input', () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => checkTotal(Buffer.from(bytes).toString('utf8'))), { numRuns: 200 })
    for (const s of ['', ' ', '\n\n', '---', '~', 'null', '[]', '{}', '- ', '- null', '\uFEFF- name: a']) checkTotal(s)
  })

  it('deep nesting and alias bombs end with a diagnostic', () => {
    for (const s of ['['.repeat(50_000), '- '.repeat(5_000) + 'x', '{a: '.repeat(10_000)]) checkTotal(s)
    let bomb = 'x: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n'
    for (let i = 1; i < 15; i++) bomb += `y${i}: &a${i} [${Array(10).fill(`*a${i - 1}`).join(', ')}]\n`
    const inList = `- name: a\n  type: http\n  allow: &r\n    - {domains: [a.example], methods: [GET]}\n${bomb.replace(/^/gm, '  ')}`
    checkTotal(inList)
    checkTotal(`- ${bomb.replace(/\n(?=.)/g, '\n  ')}`)
  })
})
