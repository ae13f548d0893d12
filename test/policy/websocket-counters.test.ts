// caps.yaml websocket.* counters (docs/policy.md "WebSocket counters"): what compiles, what one
// message adds, and what `caps lint` refuses.
import { describe, expect, it } from 'vitest'
import { compilePolicy } from '../../src/policy/index.js'

const doc = (counters: string): string => `
- name: rt
  type: http
  allow:
    - {domains: [api.example], methods: [GET], paths: [/v1/realtime]}
  budgets:
    counters:
${counters.trim().split('\n').map((l) => `      ${l}`).join('\n')}
`

const GOOD = doc(`
- {name: msgs, source: websocket.messages, workspace: {max: 1000}}
- {name: up, source: websocket.bytes, direction: to_upstream, workspace: {max: 100000}}
- name: tokens
  source: websocket.message
  direction: to_agent
  value: 'event.type == "response.completed" ? event.data.response.usage.total_tokens : 0'
  failure_charge: 3
  reserve_per_request: 10
  workspace: {max: 5000}
`)

const codes = (src: string): string[] => compilePolicy(src).diagnostics.filter((d) => d.severity === 'error').map((d) => d.code)

describe('websocket counters', () => {
  it('compile, and meter a message by count, by bytes in one direction, and by CEL over a JSON text message', () => {
    const res = compilePolicy(GOOD)
    expect(res.diagnostics).toEqual([])
    if (!res.ok) return
    const [msgs, up, tokens] = res.policy.counters('rt')
    expect([msgs!.phase, msgs!.source, up!.direction, tokens!.direction]).toEqual(['websocket', 'websocket.messages', 'to_upstream', 'to_agent'])
    const completed = Buffer.from(JSON.stringify({ type: 'response.completed', response: { usage: { total_tokens: 1234 } } }))
    const delta = Buffer.from(JSON.stringify({ type: 'response.output_text.delta', delta: 'hi' }))
    expect(msgs!.fromMessage({ direction: 'to_agent', text: true, data: completed })).toBe(1)
    expect(up!.fromMessage({ direction: 'to_upstream', text: false, data: Buffer.alloc(7) })).toBe(7)
    expect(up!.fromMessage({ direction: 'to_agent', text: false, data: Buffer.alloc(7) })).toBe(0)
    expect(tokens!.fromMessage({ direction: 'to_agent', text: true, data: completed })).toBe(1234)
    expect(tokens!.fromMessage({ direction: 'to_agent', text: true, data: delta })).toBe(0)
    expect(tokens!.fromMessage({ direction: 'to_upstream', text: true, data: completed })).toBe(0)
    expect(tokens!.fromMessage({ direction: 'to_agent', text: true, data: Buffer.from('not json') })).toBe('parse_failed')
    expect(tokens!.fromMessage({ direction: 'to_agent', text: false, data: completed })).toBe('parse_failed')
    expect(tokens!.fromMessage({ direction: 'to_agent', text: true, data: Buffer.from('{"type":"response.completed"}') })).toBe('cel_eval_error')
    expect(tokens!.reservePerRequest).toBe(10)
  })

  it('caps lint: a websocket.message counter needs a value typed number over `event` only', () => {
    expect(codes(doc('- {name: t, source: websocket.message, workspace: {max: 10}}'))).toContain('missing_key')
    expect(codes(doc(`- {name: t, source: websocket.message, value: '"many"', workspace: {max: 10}}`))).toContain('cel_result_type')
    expect(codes(doc(`- {name: t, source: websocket.message, value: 'response.size', workspace: {max: 10}}`))).toContain('cel_undeclared')
  })

  it('caps lint: direction is a closed enum and only for websocket sources; HTTP-only fields are refused on websocket counters', () => {
    expect(codes(doc('- {name: t, source: websocket.messages, direction: sideways, workspace: {max: 10}}'))).toContain('invalid_enum')
    expect(codes(doc('- {name: t, source: request.count, direction: to_agent, workspace: {max: 10}}'))).not.toEqual([])
    expect(codes(doc('- {name: t, source: websocket.bytes, status_codes: ["2xx"], workspace: {max: 10}}'))).not.toEqual([])
    expect(codes(doc(`- {name: t, source: websocket.messages, value: '1', workspace: {max: 10}}`))).not.toEqual([])
    expect(codes(doc('- {name: t, source: websocket.frames, workspace: {max: 10}}'))).toContain('invalid_enum')
  })
})
