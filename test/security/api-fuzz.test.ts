// Generated hostile input against every route of the real app, over a real HTTP client on
// loopback (fast-check, bounded in runs and time): arbitrary path parameters, query strings,
// headers and bodies — NUL, lone surrogates, deep nesting, broken JSON, wrong content types,
// garbage credentials. Every answer must be the /v1 error envelope or a success, never a 5xx other
// than the documented 503; the server must still answer afterwards; no audit row is written twice
// (each created key has exactly one api_key_created row). Routes are enumerated from the Fastify
// instance and checked against /v1/openapi.json (every /v1 route documented, every documented
// operation served), so a route added later is fuzzed too; bodies and query names are also
// generated from each operation's OpenAPI schema with hostile values in every field, so they get
// past shape checks into the routes (credentials and OAuth included: the app has a master key and
// a public URL, and the OAuth client's resolver answers at once with an address it refuses).
import type { AddressInfo } from 'node:net'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AddressGuard } from '../../src/net/index.js'
import { OAuthHttp, Sealer } from '../../src/secrets/index.js'
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
/** A JSON Schema as OpenAPI documents it (the parts the generator reads). */
interface Schema { type?: string | string[]; properties?: Record<string, Schema>; items?: Schema; enum?: unknown[]; required?: string[]; anyOf?: Schema[]; oneOf?: Schema[] }
/**
 * Values of the schema's shape with hostile leaves: strings are hostile strings or enum members,
 * numbers are extremes, and any node may be replaced by a wrong type or a deep nesting.
 */
function fromSchema(schema: Schema | undefined, depth = 0): fc.Arbitrary<unknown> {
  const wrong = fc.oneof(hostileString, fc.integer(), fc.constant(null), fc.boolean(), fc.constant([]), fc.constant({}), deepJson.map((j) => JSON.parse(j) as unknown))
  if (!schema || depth > 4) return wrong
  const alts = schema.anyOf ?? schema.oneOf
  if (alts?.length) return fc.oneof(...alts.map((a) => fromSchema(a, depth + 1)))
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type
  let shaped: fc.Arbitrary<unknown>
  if (schema.enum?.length) shaped = fc.oneof(fc.constantFrom(...schema.enum), hostileString)
  else if (type === 'object') {
    const props = Object.entries(schema.properties ?? {})
    shaped = props.length === 0
      ? fc.dictionary(hostileString, hostileString, { maxKeys: 3 })
      : fc.record(Object.fromEntries(props.map(([k, v]) => [k, fromSchema(v, depth + 1)])), { requiredKeys: (schema.required ?? []).filter((k) => schema.properties?.[k]) })
  } else if (type === 'array') shaped = fc.array(fromSchema(schema.items, depth + 1), { maxLength: 4 })
  else if (type === 'integer' || type === 'number') shaped = fc.oneof(fc.integer(), fc.constantFrom(0, -1, 2 ** 53, -(2 ** 31), 1e308))
  else if (type === 'boolean') shaped = fc.boolean()
  else shaped = hostileString
  return fc.oneof({ weight: 4, arbitrary: shaped }, { weight: 1, arbitrary: wrong })
}

interface Operation { parameters?: Array<{ in: string; name: string }>; requestBody?: { content?: Record<string, { schema?: Schema }> } }
/** A fastify route pattern as OpenAPI spells its path (`/v1/x/:id` → `/v1/x/{id}`). */
const openApiPath = (url: string): string => url.replace(/:([A-Za-z_]+)/g, '{$1}')

const contentType = fc.constantFrom('application/json', 'application/json', 'application/json; charset=utf-8', 'text/plain', 'multipart/form-data; boundary=x', 'application/x-www-form-urlencoded', undefined)

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
  let routes: ReadonlyArray<{ method: string; url: string; op: Operation | undefined }>
  let oauthHttp: OAuthHttp
  beforeAll(async () => {
    // A master key (the secrets, credentials and OAuth routes do their work rather than answer 503)
    // and OAuth consent configured; provider calls resolve at once to an address the guard refuses.
    h = await createHarness({ open: d.open, sealer: new Sealer(Buffer.alloc(32, 5)) })
    oauthHttp = new OAuthHttp({ guard: new AddressGuard(() => [], async () => [{ address: '192.0.2.1', family: 4 }]), timeoutSeconds: 2 })
    h.deps.oauth = { publicUrl: 'https://corral.example.test', http: oauthHttp }
    ;({ ownerKey, orgId } = await h.newOrg())
    await h.app.listen({ port: 0, host: '127.0.0.1' })
    base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`
    const doc = (await (await fetch(`${base}/v1/openapi.json`)).json()) as { paths: Record<string, Record<string, Operation>> }
    routes = h.app.routeTable().filter((r) => r.method !== 'HEAD').map((r) => ({ ...r, op: doc.paths[openApiPath(r.url)]?.[r.method.toLowerCase()] }))
    expect(routes.length).toBeGreaterThan(30)
    // No route escapes the document, and nothing documented is unserved: every /v1 route has its
    // operation (and so its schema-shaped bodies below); the console's files are outside /v1.
    expect(routes.filter((r) => r.url.startsWith('/v1') && !r.op).map((r) => `${r.method} ${r.url}`)).toEqual([])
    const served = new Set(routes.map((r) => `${r.method} ${openApiPath(r.url)}`))
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`))
    expect(documented.filter((o) => !served.has(o))).toEqual([])
  })
  afterAll(async () => {
    await h.close()
    await oauthHttp?.close()
  })

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
        fc.option(fc.nat(), { nil: undefined }),
        contentType,
        // Mostly the owner: most of the surface is behind authentication.
        fc.constantFrom('owner', 'owner', 'owner', 'none', 'garbage'),
        fc.option(hostileString.map((s) => s.replace(/[^\x20-\x7e]/g, '')), { nil: undefined }),
        async (pick, params, query, generic, shapedSeed, type, auth, lastEventId) => {
          const route = routes[pick % routes.length]!
          // Half the bodies follow the operation's schema (hostile leaves), half are the generic ones.
          const schema = route.op?.requestBody?.content?.['application/json']?.schema
          const body = schema && shapedSeed !== undefined && shapedSeed % 2 === 0 ? JSON.stringify(fc.sample(fromSchema(schema), { numRuns: 1, seed: shapedSeed })[0]) : generic
          // Query names the operation documents, with hostile values, besides the generic ones.
          for (const p of route.op?.parameters ?? []) if (p.in === 'query' && shapedSeed !== undefined && (shapedSeed >> (p.name.length % 8)) % 2 === 1) query[p.name] ??= fc.sample(hostileString, { numRuns: 1, seed: shapedSeed })[0]!
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
