import { describe, expect, it } from 'vitest'
import { compilePolicy, type CompiledPolicy, type PolicyRequest } from '../../src/policy/index.js'

function compile(src: string): CompiledPolicy {
  const res = compilePolicy(src)
  if (!res.ok) throw new Error(JSON.stringify(res.diagnostics, null, 2))
  return res.policy
}

function req(method: string, url: string, headers: Record<string, string> = {}): PolicyRequest {
  const u = new URL(url)
  return { method, scheme: u.protocol === 'http:' ? 'http' : 'https', host: u.host, path: u.pathname, rawQuery: u.search.slice(1), headers }
}

const ctx = { workspace: { id: 'ws_1', org_id: 'org_1', role: 'coder', environment: 'staging' }, task: { id: 'task_1' } }

describe('admission: static match and globs', () => {
  const p = compile(`
- name: web
  type: http
  allow:
    - name: one-label
      domains: ["*.example.com"]
      methods: [GET]
      paths: [/a/*/c]
    - name: any-depth
      domains: ["**.deep.example"]
      methods: [GET]
      paths: [/files/**]
    - name: partial
      domains: ["api-*.example.org", "EXACT.example.net.", "port.example:8443", "tls.example:443"]
      methods: [GET, POST]
      paths: [/v1/items]
    - name: insecure
      domains: [plain.example]
      methods: [GET]
      allow_insecure: true
`)
  const cases: [string, string, string | null][] = [
    ['GET', 'https://a.example.com/a/b/c', 'one-label'],
    ['GET', 'https://example.com/a/b/c', null],
    ['GET', 'https://x.y.example.com/a/b/c', null],
    ['GET', 'https://a.example.com/a/b/x/c', null],
    ['GET', 'https://a.deep.example/files', 'any-depth'],
    ['GET', 'https://a.b.c.deep.example/files/x/y/z', 'any-depth'],
    ['GET', 'https://deep.example/files/x', null],
    ['GET', 'https://api-eu.example.org/v1/items', 'partial'],
    ['POST', 'https://exact.example.net/v1/items', 'partial'],
    ['GET', 'https://exact.example.net./v1/items', 'partial'],
    ['GET', 'https://port.example:8443/v1/items', 'partial'],
    ['GET', 'https://port.example/v1/items', null],
    ['GET', 'https://tls.example/v1/items', 'partial'],
    ['DELETE', 'https://exact.example.net/v1/items', null],
    ['GET', 'https://exact.example.net/v1/items/', null],
    ['GET', 'http://a.example.com/a/b/c', null],
    ['GET', 'http://plain.example/anything', 'insecure'],
    ['GET', 'http://plain.example:80/anything', 'insecure'],
  ]
  for (const [m, url, rule] of cases) {
    it(`${m} ${url} → ${rule ?? 'deny'}`, () => {
      const r = p.admit(req(m, url), {})
      if (rule === null) expect(r.decision).toBe('deny')
      else expect(r).toMatchObject({ decision: 'allow', match: { capability: 'web', rule, ruleKey: rule }, needsBody: false })
    })
  }

  it('explains a no_match for the rules that name the host, with the first failing criterion', () => {
    const r = p.admit(req('DELETE', 'http://a.example.com/a/b/c'), {})
    expect(r).toEqual({ decision: 'deny', reason: 'no_match', detail: { allowrule_eval: [{ capability: 'web', rule: 'one-label', failed: 'scheme' }] } })
    const r2 = p.admit(req('DELETE', 'https://a.example.com/a/b/c'), {})
    expect(r2.decision === 'deny' && r2.detail.allowrule_eval).toEqual([{ capability: 'web', rule: 'one-label', failed: 'method' }])
    const r3 = p.admit(req('GET', 'https://api-eu.example.org/v2'), {})
    expect(r3.decision === 'deny' && r3.detail.allowrule_eval).toEqual([{ capability: 'web', rule: 'partial', failed: 'path' }])
  })

  it('lists domain misses when no rule names the host', () => {
    const r = p.admit(req('GET', 'https://unknown.example/'), {})
    expect(r.decision === 'deny' && r.detail.allowrule_eval).toEqual(['one-label', 'any-depth', 'partial', 'insecure'].map((rule) => ({ capability: 'web', rule, failed: 'domain' })))
  })

  it('keeps document order across exact and wildcard domains of many capabilities', () => {
    let src = ''
    for (let i = 0; i < 50; i++) src += `- {name: c${i}, type: http, allow: [{domains: ["${i % 2 ? '*.shared.example' : 'x.shared.example'}"], methods: [GET]}]}\n`
    const many = compile(src)
    expect(many.admit(req('GET', 'https://x.shared.example/'), {})).toMatchObject({ decision: 'allow', match: { capability: 'c0' } })
    expect(many.admit(req('GET', 'https://y.shared.example/'), {})).toMatchObject({ decision: 'allow', match: { capability: 'c1' } })
  })
})

describe('admission CEL', () => {
  const p = compile(`
- name: cel
  type: http
  allow:
    - name: headers
      domains: [a.example]
      methods: [GET]
      match: {expr: 'request.headers["x-team"] == "core" && workspace.environment == "staging" && task.id == "task_1" && request.query["q"][0] == "a b"'}
    - name: regex
      domains: [b.example]
      methods: [GET]
      match: {expr: 'request.path.matches("^/(a|a)+$") && request.host.matches("^b\\\\.example$")'}
    - name: errors
      domains: [c.example]
      methods: [GET]
      match: {expr: 'request.headers["missing"] == "x"'}
    - name: fallback
      domains: [d.example]
      methods: [GET]
`)
  it('sees headers, query, workspace and task', () => {
    expect(p.admit(req('GET', 'https://a.example/?q=a%20b', { 'x-team': 'core' }), ctx).decision).toBe('allow')
    const r = p.admit(req('GET', 'https://a.example/?q=a%20b', { 'x-team': 'other' }), ctx)
    expect(r).toMatchObject({ decision: 'deny', reason: 'no_match' })
    expect(r.decision === 'deny' && r.detail.allowrule_eval).toContainEqual({ capability: 'cel', rule: 'headers', failed: 'match' })
  })

  it('evaluates matches() with RE2 (no catastrophic backtracking)', () => {
    expect(p.admit(req('GET', 'https://b.example/aaaa'), {}).decision).toBe('allow')
    const evil = '/' + 'a'.repeat(5000) + '!'
    const t0 = process.hrtime.bigint()
    expect(p.admit(req('GET', `https://b.example${evil}`), {}).decision).toBe('deny')
    // Not a timing assertion on the machine: RE2 answers this in microseconds, a backtracking engine would not return at all.
    expect(Number(process.hrtime.bigint() - t0)).toBeGreaterThan(0)
  })

  it('turns an evaluation error into policy_error with the rule named', () => {
    const r = p.admit(req('GET', 'https://c.example/'), {})
    expect(r).toMatchObject({ decision: 'deny', reason: 'policy_error' })
    expect(r.decision === 'deny' && r.detail.allowrule_eval).toContainEqual(expect.objectContaining({ rule: 'errors', failed: 'match_error' }))
  })
})

describe('body phase', () => {
  const p = compile(`
- name: llm
  type: http
  allow:
    - name: small-model
      domains: [llm.example]
      methods: [POST]
      paths: [/v1/chat]
      request_format: application/json
      match: {expr: 'request.body.model == "small" && request.body.max_tokens <= 1000', requires_body: true}
    - name: schema
      domains: [llm.example]
      methods: [POST]
      paths: [/v1/chat]
      request_format: application/json
      request_schema: {type: object, required: [model], properties: {model: {const: big}, n: {$ref: "#/$defs/n"}}, $defs: {n: {type: integer}}}
    - name: old-draft
      domains: [llm.example]
      methods: [PUT]
      request_format: application/json
      request_schema:
        $schema: "https://json-schema.org/draft/2019-09/schema"
        type: array
`)
  const post = (body: string, ct = 'application/json') => req('POST', 'https://llm.example/v1/chat', { 'content-type': ct })

  it('a body-matching rule leaves admission pending; checkBody picks the first rule that matches', () => {
    const r = req('POST', 'https://llm.example/v1/chat', { 'content-type': 'application/json' })
    const adm = p.admit(r, {})
    expect(adm.decision).toBe('pending')
    if (adm.decision !== 'pending') return
    expect(adm.candidates.map((c) => c.ruleKey)).toEqual(['small-model', 'schema'])
    const small = p.checkBody(adm, { request: r, context: {}, body: '{"model":"small","max_tokens":500}' })
    expect(small).toMatchObject({ decision: 'allow', match: { rule: 'small-model' }, json: { model: 'small', max_tokens: 500 }, validationsApplied: 0 })
    const big = p.checkBody(adm, { request: r, context: {}, body: Buffer.from('{"model":"big","n":3}') })
    expect(big).toMatchObject({ decision: 'allow', match: { rule: 'schema' }, validationsApplied: 1 })
    const bad = p.checkBody(adm, { request: r, context: {}, body: '{"model":"big","n":"x"}' })
    expect(bad).toMatchObject({ decision: 'deny', reason: 'schema_violation', validationsApplied: 1 })
    expect(bad.decision === 'deny' && bad.detail.errors).toEqual(['/n must be integer'])
  })

  it('format_mismatch and invalid_json', () => {
    const adm = p.admit(post(''), {})
    if (adm.decision === 'deny') throw new Error('unexpected deny')
    expect(p.checkBody(adm, { request: post('', 'text/plain'), context: {}, body: 'x' })).toMatchObject({ decision: 'deny', reason: 'format_mismatch' })
    expect(p.checkBody(adm, { request: post(''), context: {}, body: '{nope' })).toMatchObject({ decision: 'deny', reason: 'invalid_json' })
  })

  it('honours a 2019-09 $schema', () => {
    const r = req('PUT', 'https://llm.example/x', { 'content-type': 'application/json' })
    const adm = p.admit(r, {})
    expect(adm).toMatchObject({ decision: 'allow', needsBody: true })
    if (adm.decision !== 'allow') return
    expect(p.checkBody(adm, { request: r, context: {}, body: '[1]' }).decision).toBe('allow')
    expect(p.checkBody(adm, { request: r, context: {}, body: '{}' })).toMatchObject({ decision: 'deny', reason: 'schema_violation' })
  })
})

describe('transforms', () => {
  const p = compile(`
- name: t
  type: http
  allow:
    - name: json
      domains: [t.example]
      methods: [POST]
      paths: [/v1/**]
      request_format: application/json
      request_schema: {type: object}
    - name: plain
      domains: [t.example]
      methods: [GET]
  transforms:
    - name: auth-header
      header: {name: Authorization, action: set, value: '"Bearer " + secrets["token"]'}
    - name: add-via
      header: {name: Via, action: add, value: '"corral"'}
    - name: drop-cookie
      header: {name: Cookie, action: remove}
    - name: set-q
      query: {key: "a key", action: set, value: 'workspace.id + "&x"'}
    - name: drop-q
      query: {key: debug, action: remove}
    - name: ver
      applies_to: [json]
      path: {action: replace, pattern: '^/v1/', value: '"/v2/"'}
    - name: tenant
      path: {action: prefix, value: '"/t/" + workspace.org_id'}
    - name: model-header
      applies_to: [json]
      requires_body: true
      header: {name: X-Model, action: set, value: 'string(request.body.model)'}
    - name: merge
      applies_to: [json]
      body: {action: merge, value: '{"meta": {"ws": workspace.id, "n": 1}, "model": "forced"}'}
    - name: prefix
      applies_to: [json]
      body: {action: prefix, key: prompt, value: '"[ws] "'}
    - name: broken
      header: {name: X-Broken, action: set, value: 'request.headers["absent"]'}
    - name: missing-secret
      header: {name: X-Other, action: set, value: 'secrets["nope"]'}
    - auth: {credential: gh, provider: github}
`)
  const secrets = (k: string) => (k === 'token' ? 's3cret' : undefined)

  it('applies every variant in order and reports failures by key', () => {
    const r = req('POST', 'https://t.example/v1/chat?debug=1&keep=%2F', { cookie: 'a=b', via: 'upstream', 'content-type': 'application/json' })
    const adm = p.admit(r, ctx)
    if (adm.decision !== 'allow') throw new Error('expected allow')
    const body = p.checkBody(adm, { request: r, context: ctx, body: '{"model":"m1","prompt":"hello","meta":{"keep":true}}' })
    if (body.decision !== 'allow') throw new Error('expected allow')
    const out = p.applyTransforms({ match: body.match, request: r, context: ctx, json: body.json, hasBody: true, secrets })
    expect(out.headers.authorization).toEqual(['Bearer s3cret'])
    expect(out.headers.via).toEqual(['upstream', 'corral'])
    expect(out.headers.cookie).toBeUndefined()
    expect(out.headers['x-model']).toEqual(['m1'])
    expect(out.rawQuery).toBe('keep=%2F&a%20key=ws_1%26x')
    expect(out.path).toBe('/t/org_1/v2/chat')
    expect(out.json).toEqual({ model: 'forced', prompt: '[ws] hello', meta: { keep: true, ws: 'ws_1', n: 1 } })
    expect(out.bodyChanged).toBe(true)
    expect(out.failed).toEqual({ broken: 'eval_error', 'missing-secret': 'apply_error' })
    expect(out.auth).toEqual([{ credential: 'gh', provider: 'github', key: 'transform[12]' }])
    expect(out.applied).toBe(10)
  })

  it('skips transforms whose applies_to excludes the rule, and reports body_absent', () => {
    const r = req('GET', 'https://t.example/v1/x', {})
    const adm = p.admit(r, ctx)
    if (adm.decision !== 'allow') throw new Error('expected allow')
    const out = p.applyTransforms({ match: adm.match, request: r, context: ctx, secrets })
    expect(out.path).toBe('/t/org_1/v1/x')
    expect(out.headers['x-model']).toBeUndefined()
    expect(out.failed['merge']).toBeUndefined()
    const json = p.admit(req('POST', 'https://t.example/v1/x'), ctx)
    if (json.decision !== 'allow') throw new Error('expected allow')
    const noBody = p.applyTransforms({ match: json.match, request: req('POST', 'https://t.example/v1/x'), context: ctx, hasBody: false, secrets })
    expect(noBody.failed).toMatchObject({ merge: 'body_absent', prefix: 'body_absent' })
  })

  it('reports type_mismatch when a dyn value has the wrong runtime type', () => {
    const q = compile(`
- name: q
  type: http
  allow:
    - {domains: [q.example], methods: [POST], request_format: application/json, request_schema: {type: object}}
  transforms:
    - {requires_body: true, header: {name: X-N, action: set, value: request.body.n}}
`)
    const r = req('POST', 'https://q.example/', { 'content-type': 'application/json' })
    const adm = q.admit(r, {})
    if (adm.decision !== 'allow') throw new Error('expected allow')
    const out = q.applyTransforms({ match: adm.match, request: r, context: {}, json: { n: 5 }, hasBody: true, secrets: () => undefined })
    expect(out.failed).toEqual({ 'transform[0]': 'type_mismatch' })
  })
})

describe('counters', () => {
  const p = compile(`
- name: c
  type: http
  allow:
    - {domains: [c.example], methods: [POST], paths: [/x]}
  transforms:
    - header: {name: Accept-Encoding, action: set, value: '"identity"'}
  budgets:
    counters:
      - {name: calls, source: request.count, workspace: {max: 10, ttl: 1h}, task: {max: 5, ttl: 30m}}
      - {name: up, source: request.bytes, workspace: {max: 10}}
      - {name: down, source: response.bytes, status_codes: ["2xx", "304"], workspace: {max: 10}}
      - name: hdr
        source: response
        status_codes: ["200-299"]
        accumulator: sum
        value: int(response.headers["x-used"])
        failure_charge: 2
        workspace: {max: 10}
      - name: doc
        source: response
        requires_body: true
        framing: single_document
        format: application/json
        encoding: identity
        status_codes: ["2xx"]
        accumulator: last
        value: response.body.usage.total
        failure_charge: 3
        workspace: {max: 100}
      - name: sse
        source: response
        requires_body: true
        framing: sse
        format: application/json
        encoding: identity
        status_codes: ["2xx"]
        accumulator: sum
        sse_event: delta
        value: int(event.data.n)
        terminal_sentinel: "[DONE]"
        failure_charge: 4
        reserve_per_request: 50
        max_concurrent: 2
        workspace: {max: 100}
      - name: sse-cel
        source: response
        requires_body: true
        framing: sse
        format: application/json
        encoding: identity
        status_codes: ["2xx"]
        accumulator: max
        value: event.data.total
        terminal_cel: 'event.type == "end" && response.status == 200'
        workspace: {max: 100}
`)
  const [calls, up, down, hdr, doc, sse, sseCel] = p.counters('c')
  const resp = (headers: Record<string, string>, status = 200, size = 0) => ({ status, headers, size })

  it('exposes limits and status matching', () => {
    expect(calls).toMatchObject({ name: 'calls', source: 'request.count', phase: 'request', workspace: { max: 10, ttl: '1h', ttlMs: 3_600_000 }, task: { max: 5, ttlMs: 1_800_000 } })
    expect(sse).toMatchObject({ reservePerRequest: 50, failureCharge: 4, maxConcurrent: 2, framing: 'sse', accumulator: 'sum' })
    expect(down.matchesStatus(204)).toBe(true)
    expect(down.matchesStatus(304)).toBe(true)
    expect(down.matchesStatus(301)).toBe(false)
    expect(calls.matchesStatus(500)).toBe(true)
    expect(p.counters('nope')).toEqual([])
  })

  it('request and byte amounts', () => {
    expect(calls.requestAmount(1234)).toBe(1)
    expect(up.requestAmount(1234)).toBe(1234)
    expect(down.requestAmount(1234)).toBe(0)
    expect(down.fromResponseHeaders(resp({}, 200, 777))).toEqual({ value: 777 })
  })

  it('response header counters, floored on CEL errors', () => {
    expect(hdr.fromResponseHeaders(resp({ 'x-used': '7' }))).toEqual({ value: 7 })
    expect(hdr.fromResponseHeaders(resp({}))).toEqual({ value: 2, floored: 'cel_eval_error' })
    expect(hdr.fromResponseHeaders(resp({ 'x-used': '1' }))).toEqual({ value: 2, floored: 'extracted_below_failure_charge' })
  })

  it('single_document extraction and its floored reasons', () => {
    const json = resp({ 'content-type': 'application/json; charset=utf-8' })
    expect(doc.fromDocument(json, '{"usage":{"total":42.9}}')).toEqual({ value: 42 })
    expect(doc.fromDocument(json, Buffer.from('{"usage":{"total":42}}'))).toEqual({ value: 42 })
    expect(doc.fromDocument(json, '{oops')).toEqual({ value: 3, floored: 'parse_failed' })
    expect(doc.fromDocument(json, '{"usage":{}}')).toEqual({ value: 3, floored: 'cel_eval_error' })
    expect(doc.fromDocument(resp({ 'content-type': 'text/event-stream' }), '')).toEqual({ value: 3, floored: 'framing_mismatch' })
    expect(doc.fromDocument(resp({ 'content-type': 'text/html' }), '')).toEqual({ value: 3, floored: 'format_mismatch' })
    expect(doc.fromDocument(resp({ 'content-type': 'application/json', 'content-encoding': 'gzip' }), '{}')).toEqual({ value: 3, floored: 'encoding_mismatch' })
  })

  it('SSE metering across chunk boundaries, filtered by event type, ended by a sentinel', () => {
    const m = sse.meter(resp({ 'content-type': 'text/event-stream' }))
    const stream = 'event: start\ndata: {"n": 1000}\n\nevent: delta\ndata: {"n": 5}\n\nevent: delta\ndata: {"n": 6}\n\ndata: [DONE]\n\nevent: delta\ndata: {"n": 99}\n\n'
    for (let i = 0; i < stream.length; i += 7) m.feed(Buffer.from(stream.slice(i, i + 7)))
    expect(m.terminated).toBe(true)
    expect(m.end()).toEqual({ value: 11 })
  })

  it('SSE floored reasons', () => {
    const cut = sse.meter(resp({ 'content-type': 'text/event-stream' }))
    cut.feed('event: delta\ndata: {"n": 2}\n\n')
    expect(cut.end()).toEqual({ value: 4, floored: 'terminator_not_observed' })
    const big = sse.meter(resp({ 'content-type': 'text/event-stream' }))
    big.feed('event: delta\ndata: {"n": 20}\n\n')
    expect(big.end()).toEqual({ value: 20, floored: 'terminator_not_observed' })
    const notSse = sse.meter(resp({ 'content-type': 'application/json' }))
    notSse.feed('{}')
    expect(notSse.end()).toEqual({ value: 4, floored: 'framing_mismatch' })
    const gz = sse.meter(resp({ 'content-type': 'text/event-stream', 'content-encoding': 'br' }))
    expect(gz.end()).toEqual({ value: 4, floored: 'encoding_mismatch' })
    const garbage = sse.meter(resp({ 'content-type': 'text/event-stream' }))
    garbage.feed('event: delta\ndata: not json\n\ndata: [DONE]\n\n')
    expect(garbage.end()).toEqual({ value: 4, floored: 'parse_failed' })
  })

  it('terminal_cel sees the event and the response', () => {
    const m = sseCel.meter(resp({ 'content-type': 'text/event-stream' }))
    m.feed('data: {"total": 3}\n\ndata: {"total": 9}\n\ndata: {"total": 4}\n\nevent: end\ndata: {}\n\n')
    expect(m.terminated).toBe(true)
    expect(m.end()).toEqual({ value: 9 })
  })
})

describe('evaluators never throw', () => {
  const p = compile(`
- name: n
  type: http
  allow:
    - {name: r, domains: [n.example], methods: [POST], request_format: application/json, request_schema: {type: object}}
  transforms:
    - {name: h, header: {name: X, action: set, value: '"v"'}}
`)
  it('turns malformed input into policy_error denies and failed transforms', () => {
    const bad = { method: undefined, host: 7, path: null, headers: null } as unknown as PolicyRequest
    expect(p.admit(bad, {})).toMatchObject({ decision: 'deny', reason: 'policy_error' })
    const match = { capability: 'n', capabilityIndex: 0, rule: 'r', ruleIndex: 0, ruleKey: 'r' }
    expect(p.checkBody({ decision: 'allow', match, needsBody: true }, { request: bad, context: {}, body: '{}' })).toMatchObject({ decision: 'deny', reason: 'policy_error' })
    expect(p.checkBody({ decision: 'allow', match: { ...match, capabilityIndex: 9 }, needsBody: true }, { request: req('POST', 'https://n.example/'), context: {}, body: '{}' })).toMatchObject({ decision: 'deny', reason: 'internal_error' })
  })
})

describe('schema patterns run on RE2', () => {
  const doc = (pat: string) =>
    `- {name: a, type: http, allow: [{domains: [a.example], methods: [POST], paths: [/], request_format: application/json, request_schema: {type: object, properties: {s: {type: string, pattern: '${pat}'}}}}]}`
  it('evaluates a catastrophic pattern in linear time and rejects non-RE2 syntax at save', () => {
    const p = compile(doc('^(a|a)+$'))
    const r = req('POST', 'https://a.example/', { 'content-type': 'application/json' })
    const adm = p.admit(r, {})
    if (adm.decision === 'deny') throw new Error('unexpected deny')
    // With a backtracking engine this input takes 2^40 steps; RE2 answers at once.
    expect(p.checkBody(adm, { request: r, context: {}, body: JSON.stringify({ s: 'a'.repeat(40) + '!' }) })).toMatchObject({ decision: 'deny', reason: 'schema_violation' })
    expect(p.checkBody(adm, { request: r, context: {}, body: '{"s":"aaa"}' }).decision).toBe('allow')
    expect(compilePolicy(doc('(?=x)')).diagnostics.map((d) => d.code)).toEqual(['invalid_schema'])
  })
})

describe('globs with many wildcards', () => {
  const p = compile(`
- name: g
  type: http
  allow:
    - {name: multi, domains: ["a*b*c.example"], methods: [GET], paths: ["/x*y*z*w", "/**/deep/**"]}
`)
  it('match like the simple ones and stay linear on hostile input (RE2)', () => {
    expect(p.admit(req('GET', 'https://aXbYc.example/x1y2z3w'), {}).decision).toBe('allow')
    expect(p.admit(req('GET', 'https://abc.example/a/b/deep/c'), {}).decision).toBe('allow')
    expect(p.admit(req('GET', 'https://abc.example/deep'), {}).decision).toBe('allow')
    expect(p.admit(req('GET', 'https://abc.example/x' + 'y'.repeat(20000) + 'z'.repeat(20000)), {}).decision).toBe('deny')
  })
})

describe('normalizeHost', () => {
  it('lowercases, strips one trailing dot and the default port of the scheme', async () => {
    const { normalizeHost } = await import('../../src/policy/index.js')
    expect(normalizeHost('API.Example.COM.')).toBe('api.example.com')
    expect(normalizeHost('api.example.com:443')).toBe('api.example.com')
    expect(normalizeHost('api.example.com:443', 'http')).toBe('api.example.com:443')
    expect(normalizeHost('api.example.com:80', 'http')).toBe('api.example.com')
    expect(normalizeHost('api.example.com:8443')).toBe('api.example.com:8443')
    expect(normalizeHost('[::1]')).toBe('[::1]')
    expect(normalizeHost('a' + ':1'.repeat(50000)).length).toBeGreaterThan(0)
  })
})
