// The `mcp` block of an allow rule at save time: conditions over a tool's arguments type-checked
// against its declared input_schema (errors name the tool and the field), names in canonical form,
// and the evaluators the proxy calls (exact names, schema before condition, the default).
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { compilePolicy, parseStrictJson, type CompiledPolicy, type McpServerPolicy } from '../../src/policy/index.js'

const SCHEMA = `{type: object, properties: {repo: {type: string}, count: {type: integer}, ratio: {type: number}, draft: {type: boolean}, labels: {type: array, items: {type: string}}, owner: {type: object, properties: {login: {type: string}, id: {type: integer}}}, meta: {type: object}}, required: [repo]}`

function doc(tool: string, extra = ''): string {
  return `- name: tools
  type: http
  allow:
    - name: mcp
      domains: [mcp.example.com]
      methods: [POST, GET, DELETE]
      paths: [/mcp]
      mcp:
        tools:
${tool}${extra}`
}
const withWhen = (when: string, schema = SCHEMA) => doc(`          - name: create_issue\n            input_schema: ${schema}\n            when: '${when}'\n`)

function errors(text: string): { code: string; message: string; path: string }[] {
  return compilePolicy(text).diagnostics.filter((d) => d.severity === 'error').map(({ code, message, path }) => ({ code, message, path }))
}

function server(text: string): McpServerPolicy {
  const res = compilePolicy(text)
  if (!res.ok) throw new Error(JSON.stringify(res.diagnostics))
  const policy: CompiledPolicy = res.policy
  const adm = policy.admit({ method: 'POST', scheme: 'https', host: 'mcp.example.com', path: '/mcp', rawQuery: '', headers: {} }, {})
  if (adm.decision !== 'allow') throw new Error('not admitted')
  return policy.mcp(adm.match)!
}

describe('caps lint types a tool condition by its input_schema', () => {
  it.each([
    ['args.repo == "a/b" && args.count < 10', 'scalars'],
    ['args.ratio < 0.5 && args.ratio > 0', 'a number compared with a double'],
    ['args.draft', 'a boolean'],
    ['args.labels.exists(l, l == "bug")', 'a list of strings'],
    ['args.owner.login == "me" && args.owner.id > 3', 'a nested object'],
    ['has(args.meta) && args.meta.anything == 1', 'an object without properties is a map of dyn'],
    ['args.repo.startsWith("acme/") && size(args.repo) < 100', 'string functions'],
  ])('accepts %s (%s)', (when) => {
    expect(errors(withWhen(when))).toEqual([])
  })

  it.each([
    ['args.titel == "x"', 'cel_undeclared', /tool "create_issue": undeclared reference: args\.titel \(not a property in its input_schema\)/],
    ['args.owner.name == "x"', 'cel_undeclared', /tool "create_issue": undeclared reference: args\.owner\.name/],
    ['args.count == "ten"', 'cel_type', /tool "create_issue": CEL type error: .*int == string \(args\.count\)/],
    ['args.repo > 3', 'cel_type', /tool "create_issue": CEL type error: .*string > int \(args\.repo\)/],
    ['args.draft == "yes"', 'cel_type', /tool "create_issue": CEL type error: .*bool == string \(args\.draft\)/],
    ['args.owner.id == "x"', 'cel_type', /tool "create_issue": CEL type error: .*int == string \(args\.owner\.id\)/],
    ['args.labels.exists(l, l == 1)', 'cel_type', /tool "create_issue": CEL type error/],
    ['args.repo', 'cel_result_type', /tool "create_issue": expression must produce bool/],
    ['request.path == "/mcp"', 'cel_undeclared', /tool "create_issue": undeclared reference: request/],
  ])('refuses %s with %s naming the tool and field', (when, code, message) => {
    const errs = errors(withWhen(when))
    expect(errs).toHaveLength(1)
    expect(errs[0]).toMatchObject({ code, path: '/0/allow/0/mcp/tools/0/when' })
    expect(errs[0]!.message).toMatch(message)
  })

  it('without an input_schema, args is dynamic JSON: any field type-checks', () => {
    expect(errors(doc(`          - name: t\n            when: 'args.whatever.deep == 1 && args.x == "y"'\n`))).toEqual([])
  })

  it('an input_schema that is not a JSON Schema is refused, naming the tool', () => {
    const errs = errors(doc(`          - name: t\n            input_schema: {type: 12}\n`))
    expect(errs[0]).toMatchObject({ code: 'invalid_schema' })
    expect(errs[0]!.message).toMatch(/tool "t"/)
  })

  it.each([
    ['a full-width letter', 'ｃreate_issue', 'mcp_name_not_canonical'],
    ['a ligature', 'ﬁle_read', 'mcp_name_not_canonical'],
    ['an empty name', '""', 'mcp_name_not_canonical'],
  ])('a tool name with %s is refused', (_shape, name, code) => {
    expect(errors(doc(`          - name: ${name}\n`))[0]).toMatchObject({ code })
  })

  it('a name outside printable ASCII but in NFKC form is a warning', () => {
    const res = compilePolicy(doc(`          - name: créer\n`))
    expect(res.ok).toBe(true)
    expect(res.diagnostics.map((d) => d.code)).toEqual(['mcp_name_not_ascii'])
  })

  it.each([
    ['the same tool twice', `          - name: a\n          - name: a\n`, 'duplicate_name'],
    ['an unknown key', `          - name: a\n            args: {}\n`, 'unknown_key'],
    ['tools/call named in methods', `          - name: a\n`, 'field_rejected', `        methods: [tools/call]\n`],
    ['a bad default', `          - name: a\n`, 'invalid_enum', `        default: maybe\n`],
  ])('%s is refused', (_shape, tools, code, extra = '') => {
    expect(errors(doc(tools, extra)).map((e) => e.code)).toContain(code)
  })

  it('request_schema or match beside mcp is refused: the body is JSON-RPC', () => {
    const text = doc(`          - name: a\n`).replace('      mcp:', '      request_format: application/json\n      mcp:')
    expect(errors(text).map((e) => e.code)).toContain('field_rejected')
  })
})

describe('the server policy decides a call', () => {
  const s = server(withWhen('args.repo.startsWith("acme/") && (!has(args.count) || args.count < 5)') + `        resources:\n          - uri: "docs://team/*"\n          - uri: docs://readme\n        prompts:\n          - name: greet\n        methods: [completion/complete]\n`)
  const call = (name: string, args: unknown) => s.decide({ kind: 'request', method: 'tools/call', params: { name, arguments: args } }, {})

  it('integers in the arguments are CEL ints; the condition decides', () => {
    expect(call('create_issue', { repo: 'acme/x', count: 4 })).toMatchObject({ allow: true, rule: 'tools/create_issue', tool: 'create_issue' })
    expect(call('create_issue', { repo: 'acme/x', count: 5 })).toMatchObject({ allow: false, reason: 'no_match' })
    expect(call('create_issue', { repo: 'other/x' })).toMatchObject({ allow: false, reason: 'no_match' })
  })

  it('the schema is checked before the condition', () => {
    expect(call('create_issue', { count: 1 })).toMatchObject({ allow: false, reason: 'schema_violation', errors: ["/ must have required property 'repo'"] })
    expect(call('create_issue', { repo: 'acme/x', count: '1' })).toMatchObject({ allow: false, reason: 'schema_violation' })
  })

  it.each(['Create_issue', 'create_issue ', 'create_іssue', 'ｃreate_issue', 'create_issue\u0000'])('%j is not create_issue', (name) => {
    expect(call(name, { repo: 'acme/x' })).toMatchObject({ allow: false, rule: 'tools', reason: 'no_match' })
  })

  it('resources by exact URI or prefix, prompts by name, other methods by name or the default', () => {
    const d = (method: string, params: unknown, kind: 'request' | 'notification' = 'request') => s.decide({ kind, method, params }, {})
    expect(d('resources/read', { uri: 'docs://team/a/b' })).toMatchObject({ allow: true, rule: 'resources[0]' })
    expect(d('resources/read', { uri: 'docs://readme' })).toMatchObject({ allow: true, rule: 'resources[1]' })
    expect(d('resources/read', { uri: 'docs://readme2' })).toMatchObject({ allow: false })
    expect(d('prompts/get', { name: 'greet' })).toMatchObject({ allow: true })
    expect(d('prompts/get', { name: 'Greet' })).toMatchObject({ allow: false })
    expect(d('prompts/get', { name: 'greet', arguments: { who: 3 } })).toMatchObject({ allow: false, reason: 'schema_violation' })
    expect(d('completion/complete', {})).toMatchObject({ allow: true, rule: 'methods/completion/complete' })
    expect(d('sampling/createMessage', {})).toMatchObject({ allow: false, rule: 'default' })
    expect(d('tools/call', { name: 'create_issue', arguments: { repo: 'acme/x' } }, 'notification')).toMatchObject({ allow: false, rule: 'notification' })
    expect(d('notifications/cancelled', {}, 'notification')).toMatchObject({ allow: true })
  })

  it('list entries are shown by exact name or URI match', () => {
    expect(s.listed('tools', { name: 'create_issue' })).toBe(true)
    expect(s.listed('tools', { name: 'Create_issue' })).toBe(false)
    expect(s.listed('resources', { uri: 'docs://team/x' })).toBe(true)
    expect(s.listed('resources', { uri: 'docs://other' })).toBe(false)
    expect(s.listed('prompts', { name: 'greet' })).toBe(true)
    expect(s.listed('tools', 'create_issue')).toBe(false)
  })
})

describe('prompt and resource conditions are typed too', () => {
  const prompts = (when: string) => doc(`          - name: t\n`, `        prompts:\n          - name: p\n            when: '${when}'\n`)
  const resources = (when: string) => doc(`          - name: t\n`, `        resources:\n          - uri: "docs://x/*"\n            when: '${when}'\n`)
  it('prompt arguments are a map of strings', () => {
    expect(errors(prompts('args.who == "corral" && prompt == "p"'))).toEqual([])
    expect(errors(prompts('args.who == 3'))[0]).toMatchObject({ code: 'cel_type' })
  })
  it('a resource condition sees the URI as a string, and nothing of a tool', () => {
    expect(errors(resources('uri.startsWith("docs://x/public/")'))).toEqual([])
    expect(errors(resources('uri > 3'))[0]).toMatchObject({ code: 'cel_type' })
    expect(errors(resources('args.x == 1'))[0]).toMatchObject({ code: 'cel_undeclared' })
  })
})

describe('the strict JSON reader', () => {
  it('reads every JSON text without duplicate keys as JSON.parse does', () => {
    fc.assert(fc.property(fc.jsonValue({ maxDepth: 5 }), (v) => {
      const text = JSON.stringify(v)
      const r = parseStrictJson(text)
      expect(r.ok).toBe(true)
      if (r.ok) expect(r.value).toEqual(JSON.parse(text))
    }), { numRuns: 300 })
  })

  it('finds a key written twice in any object at any depth, in any spelling of its characters', () => {
    const escaped = (k: string) => `"${[...k].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}"`
    fc.assert(fc.property(fc.string({ minLength: 1, maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), fc.nat({ max: 3 }), fc.boolean(), (key, other, depth, escape) => {
      let inner = `{${JSON.stringify(key)}:1,"pad":${JSON.stringify(other)},${escape ? escaped(key) : JSON.stringify(key)}:2}`
      for (let i = 0; i < depth; i++) inner = i % 2 ? `[${inner}]` : `{"k${i}":${inner}}`
      const r = parseStrictJson(inner)
      expect(r.ok).toBe(false)
    }), { numRuns: 300 })
  })
})
