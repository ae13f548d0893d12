// Route schemas are compiled at a route's first request, not at start-up (src/server/lazy-schemas.ts;
// docs/reliability.md "Memory footprint"). Validation must not weaken: a route's first request is
// refused exactly as an eagerly compiled schema refuses it, and every route's schema still compiles.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { schemaCompilation } from '../../src/server/lazy-schemas.js'
import { createHarness, type Harness } from './harness.js'

describe('route schemas compiled at first use', () => {
  let h: Harness
  beforeAll(async () => {
    h = await createHarness()
  })
  afterAll(() => h.close())

  it('a ready app that has served nothing has compiled no route schema', () => {
    const c = schemaCompilation(h.app)!
    expect(c.compiled).toBe(0)
    expect(c.pending).toBeGreaterThan(100)
  })

  it("a route's first request compiles its schemas only, and bad input gets the validation envelope", async () => {
    const { ownerKey } = await h.newOrg()
    const c = schemaCompilation(h.app)!
    const before = c.pending

    const bad = await h.inject('POST', '/v1/api-keys', { token: ownerKey, body: { label: 5, permission_set: 'read_only', bogus: true } })
    expect(bad.status).toBe(400)
    expect(bad.body.error).toMatchObject({ code: 'validation_error', details: { fields: { label: 'must be string', bogus: 'is not a known field' } } })
    expect(bad.body.error.request_id).toBe(bad.headers['x-request-id'])
    expect(c.compiled).toBeGreaterThan(0)
    expect(c.pending).toBeGreaterThan(before - 10)

    const missing = await h.inject('POST', '/v1/api-keys', { token: ownerKey, body: {} })
    expect(missing.status).toBe(400)
    expect(missing.body.error.details.fields).toHaveProperty('permission_set')

    const q = await h.inject('GET', '/v1/audit?bogus=1', { token: ownerKey })
    expect(q.status).toBe(400)
    expect(q.body.error.details.fields).toHaveProperty('bogus')
  })

  it('a first good request is answered through its compiled response serializer', async () => {
    const { ownerKey } = await h.newOrg()
    const made = await h.inject('POST', '/v1/api-keys', { token: ownerKey, body: { label: 'lazy', permission_set: 'read_only' } })
    expect(made.status).toBe(201)
    expect(made.body).toMatchObject({ label: 'lazy', permission_set: 'read_only' })
    const list = await h.inject('GET', '/v1/api-keys', { token: ownerKey })
    expect(list.status).toBe(200)
    expect(list.body.api_keys.map((k: { label: string }) => k.label)).toContain('lazy')
  })

  it("every route's validators and serializers compile (the check fastify made at start-up)", () => {
    const c = schemaCompilation(h.app)!
    expect(() => c.compileAll()).not.toThrow()
    expect(c.pending).toBe(0)
    expect(c.compiled).toBeGreaterThan(100)
  })
})
