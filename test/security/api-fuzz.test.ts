// Generated hostile input against every route of the real app, over a real HTTP client on
// loopback (fast-check, bounded in runs and time): arbitrary path parameters, query strings,
// headers and bodies — NUL, lone surrogates, deep nesting, broken JSON, wrong content types,
// garbage credentials. Every answer must be the /v1 error envelope or a success, never a 5xx other
// than the documented 503; the server must still answer afterwards; no audit row is written twice
// (each created key has exactly one api_key_created row). Routes are enumerated from the Fastify
// instance, so a route added later is fuzzed too.
import type { AddressInfo } from 'node:net'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../helpers/dialects.js'
import { createHarness, type Harness } from '../server/harness.js'

/** Any UTF-16 code units, lone surrogates and NUL included. */
const units = (max: number) => fc.array(fc.integer({ min: 0, max: 0xffff }), { maxLength: max }).map((a) => String.fromCharCode(...a))
const hostileString = fc.oneof(
  fc.string({ maxLength: 40 }),
  units(20),
  fc.constantFrom('', '\0', 'a\0b', '\ud800', '\udfff', '%', '%00', '%zz', '..', '../../etc/passwd', 'x'.repeat(300), '\u{1F600}', '*', ' ', ','),
)
/** Ids that look right up to a hostile tail, so they get past shape checks to the store. */
const hostileId = fc.tuple(fc.constantFrom('', 'key_', 'ws_', 'task_', 'role_', 'org_', 'pack_', 'prov_', 'cred_', 'usr_', 'inv_'), hostileString).map(([p, s]) => p + s)
/** Audit filters of the right form with hostile values. */
const hostileFilter = fc
  .tuple(fc.constantFrom('event_type', 'workspace_id', 'user_id', 'task_id', 'category', 'reason', 'agent_role', 'decision', 'bogus'), fc.constantFrom('=', '!='), hostileString)
  .map(([c, op, v]) => `${c}${op}${v}`)
const deepJson = fc.integer({ min: 20, max: 3_000 }).map((n) => `{"a":${'['.repeat(n)}${']'.repeat(n)}}`)
const jsonBody = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
  fc.dictionary(hostileString, fc.oneof(hostileString, fc.integer(), fc.boolean(), fc.constant(null)), { maxKeys: 5 }).map((v) => JSON.stringify(v)),
  fc.record({ label: hostileString, permission_set: fc.constantFrom('read_only', 'full_access', 'nope') }).map((v) => JSON.stringify(v)),
  deepJson,
  fc.constantFrom('{', '{"a":}', 'null', '[]', '"\\ud800"', '{"__proto__":{"x":1}}', '{"constructor":{"prototype":{}}}', '\u0000'),
)
const contentType = fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain', 'multipart/form-data; boundary=x', 'application/x-www-form-urlencoded', undefined)

/** Percent-encodes every UTF-16 unit as UTF-8 where it can, and lone surrogates as raw %ED bytes. */
function encodeSegment(s: string): string {
  let out = ''
  for (const ch of s) {
    const cp = ch.codePointAt(0)!
    out += cp >= 0xd800 && cp <= 0xdfff ? `%ED%${(0xa0 | ((cp >> 6) & 0x1f)).toString(16).toUpperCase()}%${(0x80 | (cp & 0x3f)).toString(16).toUpperCase()}` : encodeURIComponent(ch)
  }
  return out
}

for (const d of testDialects()) describe(`API fuzz (every route, hostile input) [${d.name}]`, () => {
  let h: Harness
  let base: string
  let ownerKey: string
  let orgId: string
  let routes: ReadonlyArray<{ method: string; url: string }>
  beforeAll(async () => {
    h = await createHarness({ open: d.open })
    ;({ ownerKey, orgId } = await h.newOrg())
    await h.app.listen({ port: 0, host: '127.0.0.1' })
    base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`
    routes = h.app.routeTable().filter((r) => r.method !== 'HEAD')
    expect(routes.length).toBeGreaterThan(30)
  })
  afterAll(() => h.close())

  it('answers every generated request with the envelope (no 5xx but the documented 503) and stays up', async () => {
    const seen = new Map<number, number>()
    await fc.assert(
      fc.asyncProperty(
        fc.nat({ max: 10_000 }),
        fc.array(fc.oneof(hostileId, fc.constant('__ORG__')), { minLength: 4, maxLength: 4 }),
        fc.dictionary(
          fc.oneof(fc.constantFrom('filter', 'limit', 'cursor', 'from', 'to', 'order', 'api_key', 'last_event_id', 'group_by', 'metric'), hostileString),
          fc.oneof(hostileString, hostileFilter),
          { maxKeys: 3 },
        ),
        fc.option(jsonBody, { nil: undefined }),
        contentType,
        fc.constantFrom('owner', 'none', 'garbage'),
        fc.option(hostileString.map((s) => s.replace(/[^\x20-\x7e]/g, '')), { nil: undefined }),
        async (pick, params, query, body, type, auth, lastEventId) => {
          const route = routes[pick % routes.length]!
          let i = 0
          const path = route.url.replace(/:[A-Za-z_]+|\*/g, () => {
            const p = params[i++ % params.length]!
            return p === '__ORG__' ? orgId : encodeSegment(p) || 'x'
          })
          const qs = Object.entries(query).map(([k, v]) => `${encodeSegment(k)}=${encodeSegment(v)}`).join('&')
          const headers: Record<string, string> = {}
          if (auth === 'owner') headers.authorization = `Bearer ${ownerKey}`
          if (auth === 'garbage') headers.authorization = 'Bearer crl_garbage'
          if (type && body !== undefined) headers['content-type'] = type
          if (lastEventId !== undefined) headers['last-event-id'] = lastEventId
          const withBody = body !== undefined && route.method !== 'GET' && route.method !== 'DELETE'
          const res = await fetch(`${base}${path}${qs ? `?${qs}` : ''}`, {
            method: route.method,
            headers,
            ...(withBody ? { body } : {}),
            signal: AbortSignal.timeout(10_000),
          })
          seen.set(res.status, (seen.get(res.status) ?? 0) + 1)
          if (res.headers.get('content-type')?.startsWith('text/event-stream')) {
            await res.body?.cancel()
            return
          }
          const text = await res.text()
          const where = `${route.method} ${path}?${qs} → ${res.status} ${text.slice(0, 300)}`
          expect(res.status < 500 || res.status === 503, where).toBe(true)
          if (res.status >= 400) {
            const parsed = JSON.parse(text) as { error?: { code?: unknown; message?: unknown; request_id?: unknown } }
            expect(typeof parsed.error?.code, where).toBe('string')
            expect(typeof parsed.error?.message, where).toBe('string')
            expect(String(parsed.error?.request_id), where).toMatch(/^req_/)
          }
        },
      ),
      { numRuns: 2_000, interruptAfterTimeLimit: 8_000, markInterruptAsFailure: false, seed: Number(process.env.CORRAL_FUZZ_SEED ?? Date.now() % 2 ** 31) },
    )
    // Not a vacuous run: the generator reached routes, validation and successes alike.
    expect([...seen.keys()].some((s) => s >= 200 && s < 300)).toBe(true)
    expect(seen.get(400) ?? 0).toBeGreaterThan(0)

    expect((await fetch(`${base}/healthz`)).status).toBe(200)
    await h.audit.flush()
    const keys = (await h.inject('GET', '/v1/api-keys', { token: ownerKey })).body.api_keys as Array<{ id: string }>
    const created = await h.store.audit.page(orgId, { filters: [{ column: 'event_type', op: 'in', values: ['api_key_created'] }], order: 'asc', limit: 10_000 } as never)
    const perKey = new Map<string, number>()
    for (const e of created) {
      const id = (e.detail as { resource_id?: string } | undefined)?.resource_id
      if (id) perKey.set(id, (perKey.get(id) ?? 0) + 1)
    }
    for (const k of keys) expect(perKey.get(k.id) ?? 0, k.id).toBeLessThanOrEqual(1)
    expect([...perKey.values()].every((n) => n === 1)).toBe(true)
    expect(new Set(created.map((e) => e.id)).size).toBe(created.length)
  }, 60_000)
})
