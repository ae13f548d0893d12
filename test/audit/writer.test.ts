import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AUDIT_CHANNEL, AuditDrainTimeoutError, AuditUnavailableError, createAuditWriter, queryAudit, stamp } from '../../src/audit/index.js'
import { PLATFORM_ORG, CorralError } from '../../src/contract/index.js'
import { openStore, type Store } from '../../src/store/index.js'
import { testDialects } from '../helpers/dialects.js'
import { decision, mutation, orgId } from './fixtures.js'
import { failing, nested, quietLogger, spyInserts, withInsert } from './writer-helpers.js'

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

describe('stamp', () => {
  it('fills a UUIDv7 id and a millisecond RFC 3339 UTC timestamp', () => {
    const e = stamp(mutation('org_x'))
    expect(e.id).toMatch(UUID_V7)
    expect(e.timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    expect(stamp({ ...mutation('org_x'), timestamp: '2026-01-01T02:00:00+02:00' }).timestamp).toBe('2026-01-01T00:00:00.000Z')
  })

  it('refuses values outside the closed vocabularies, naming each field (for edges that answer 400)', () => {
    const bad = () => stamp({ ...mutation('org_x'), event_type: 'nope' as never, actor: 'robot' as never, reason: 'why' as never, org_id: '' })
    expect(bad).toThrow(CorralError)
    try {
      bad()
    } catch (err) {
      expect((err as CorralError).code).toBe('validation_error')
      expect(Object.keys((err as CorralError).details!.fields as object).sort()).toEqual(['actor', 'event_type', 'org_id', 'reason'])
    }
    expect(() => stamp({ ...mutation('org_x'), latency_ms: 1.5 })).toThrow(/latency_ms/)
    // Postgres integer columns are 32-bit: a value one dialect would refuse is refused for both.
    expect(() => stamp({ ...mutation('org_x'), latency_ms: 2 ** 40 })).toThrow(/latency_ms/)
    expect(() => stamp({ ...mutation('org_x'), id: 'not-a-uuid' })).toThrow(/id/)
  })
})

describe('audit writer [sqlite::memory:]', () => {
  it('inserts on the store\'s own connection (no bulk worker for a memory database), ids skipped when stored', async () => {
    const store = await openStore('sqlite::memory:')
    try {
      const org = orgId()
      const writer = createAuditWriter(store)
      const e = await writer.emit(decision(org, { latency_ms: 3, detail: { k: ['v', 1] } }))
      await writer.emit({ ...decision(org), id: e.id, timestamp: e.timestamp })
      const stored = (await queryAudit(store, org, { limit: 10, order: 'asc' })).events
      expect(stored).toEqual([e])
      await writer.close()
    } finally {
      await store.close()
    }
  })
})

for (const d of testDialects()) {
  describe(`audit writer [${d.name}]`, () => {
    let store: Store
    beforeAll(async () => {
      store = await d.open()
    })
    afterAll(async () => {
      await store.close()
    })

    const rows = async (org: string) => (await queryAudit(store, org, { limit: 10_000, order: 'asc' })).events
    const count = async (org: string) => (await rows(org)).length
    const quarantined = async (id: string) => (await store.audit.listQuarantine({ limit: 1000 })).find((q) => q.id === id)

    it('emit resolves once the row is committed; batches are bounded', async () => {
      const org = orgId()
      const sizes: number[] = []
      const writer = createAuditWriter(spyInserts(store, sizes), { batchSize: 10 })
      const emitted = await Promise.all(Array.from({ length: 25 }, (_, i) => writer.emit(decision(org, { latency_ms: i }))))
      // No flush: a resolved emit is already in the database.
      expect(await count(org)).toBe(25)
      expect(sizes.every((n) => n <= 10)).toBe(true)
      expect(sizes.reduce((a, b) => a + b, 0)).toBe(25)
      expect(await store.audit.getById(org, emitted[3].id)).toEqual(emitted[3])
      await writer.close()
      await expect(writer.emit(decision(org))).rejects.toBeInstanceOf(AuditUnavailableError)
    })

    it('inserts idempotently on id', async () => {
      const org = orgId()
      const writer = createAuditWriter(store)
      const e = await writer.emit(mutation(org))
      await writer.emit({ ...mutation(org), id: e.id, timestamp: e.timestamp })
      expect(await count(org)).toBe(1)
      expect(await store.audit.insertBatch([e, e])).toBe(0)
      expect(await count(org)).toBe(1)
      await writer.close()
    })

    it('rows of the platform scope (PLATFORM_ORG) are valid', async () => {
      const writer = createAuditWriter(store)
      const e = await writer.emit(decision(PLATFORM_ORG, { decision: 'deny', reason: 'no_token', user_id: 'system' }))
      expect(await store.audit.getById(PLATFORM_ORG, e.id)).toMatchObject({ reason: 'no_token' })
      await writer.close()
    })

    it('an invalid event never throws: it is quarantined, logged once per kind and counted', async () => {
      const org = orgId()
      const logged: string[] = []
      const writer = createAuditWriter(store, { logger: quietLogger(logged) })
      const bad = { ...decision(org), org_id: undefined as never, reason: 'because' as never }
      const [a, b] = await Promise.all([writer.emit(bad), writer.emit(bad)])
      const ok = await writer.emit(decision(org))
      expect(await count(org)).toBe(1)
      expect((await rows(org))[0].id).toBe(ok.id)
      const q = await quarantined(a.id)
      expect(q?.reason).toMatch(/^invalid_event: org_id .*reason must be one of/)
      expect(JSON.parse(q!.event)).toMatchObject({ reason: 'because', destination: 'api.example.com' })
      expect(await quarantined(b.id)).toBeDefined()
      expect(logged.filter((m) => m.includes('BUG'))).toHaveLength(1)
      expect(writer.stats()).toMatchObject({ invalid: 2, quarantined: 2, written: 1, pending: 0 })
      // Values that are no object at all, or whose getters throw, are quarantined too.
      await writer.emit(null as never)
      await writer.emit('x' as never)
      const hostile = { ...mutation(org), get detail(): never { throw new Error('boom') } }
      const h = await writer.emit(hostile as never)
      expect((await quarantined(h.id))?.reason).toMatch(/^unserializable: boom/)
      expect(writer.stats().quarantined).toBe(5)
      await writer.close()
    })

    it('stored JSON is valid for the database: NUL and lone surrogates become U+FFFD, in JSON and text columns', async () => {
      const org = orgId()
      const writer = createAuditWriter(store)
      const e = await writer.emit(
        mutation(org, { path: 'a\u0000b\ud800', detail: { label: 'x\ud800y\u0000', 'k\udc00': ['\ud83d\ude00 ok', '\\u0000 literal'] } }),
      )
      const [stored] = await rows(org)
      expect(stored.id).toBe(e.id)
      expect(stored.path).toBe('a\uFFFDb\uFFFD')
      expect(stored.detail).toEqual({ label: 'x\uFFFDy\uFFFD', 'k\uFFFD': ['\ud83d\ude00 ok', '\\u0000 literal'] })
      expect(e.detail).toEqual(stored.detail)
      expect(writer.stats().sanitized).toBe(1)
      await writer.close()
    })

    it('a row reads back exactly as emitted, whichever way it was encoded (whole, or column by column)', async () => {
      const org = orgId()
      const writer = createAuditWriter(store)
      const text = 'q"uo\\te \u001f\t\n é \ud83d\ude00 \\u0000 \\ud800 literal'
      const detail = { text, n: [0, -1.5, 2 ** 31, 1e21, null, true], 'ключ "x"': { deep: [{ a: [] }], empty: {} } }
      // Whole: every key a column. Column by column: an extra key that is not a column (not stored).
      const whole = await writer.emit(decision(org, { path: `/p/${text}`, destination: 'h.example', latency_ms: 7, detail, auth_used: ['k', text] }))
      const byColumn = await writer.emit({ ...decision(org, { path: `/p/${text}`, latency_ms: 8, detail, auth_used: [] }), extra: 'x' } as never)
      const stored = await rows(org)
      expect(stored.map((r) => r.id).sort()).toEqual([whole.id, byColumn.id].sort())
      for (const [emitted, row] of [[whole, stored.find((r) => r.id === whole.id)!], [byColumn, stored.find((r) => r.id === byColumn.id)!]] as const) {
        const { extra: _extra, ...columns } = emitted as typeof emitted & { extra?: string }
        expect(row).toEqual(columns)
        expect(row.detail).toEqual(detail)
      }
      expect(writer.stats()).toMatchObject({ sanitized: 0, quarantined: 0 })
      await writer.close()
    })

    it('an event nested 5,000 levels deep, a cycle, a bigint and an oversized event are quarantined; the log goes on', async () => {
      const org = orgId()
      const writer = createAuditWriter(store, { logger: quietLogger() })
      const cyclic: Record<string, unknown> = {}
      cyclic.self = cyclic
      const bads = [
        mutation(org, { detail: nested(5_000) }),
        mutation(org, { detail: cyclic }),
        mutation(org, { detail: { n: 10n } as never }),
        mutation(org, { detail: { blob: 'x'.repeat(2_000_000) } }),
        decision(org, { latency_ms: 2 ** 40 }),
      ]
      const out = await Promise.all([...bads.map((b) => writer.emit(b)), writer.emit(mutation(org))])
      expect(writer.stats().quarantined).toBe(5)
      expect(await count(org)).toBe(1)
      const reasons = await Promise.all(out.slice(0, 4).map(async (e) => (await quarantined(e.id))?.reason))
      expect(reasons[0]).toMatch(/^unserializable: detail is nested deeper than 32/)
      expect(reasons[1]).toMatch(/^unserializable: detail is nested deeper/)
      expect(reasons[2]).toMatch(/^unserializable: detail holds a bigint/)
      expect(reasons[3]).toMatch(/^too_large/)
      expect((await quarantined(out[4].id))?.reason).toMatch(/^invalid_event: latency_ms must be an integer from/)
      // The kept text is bounded and valid JSON.
      for (const e of out.slice(0, 4)) {
        const text = (await quarantined(e.id))!.event
        expect(text.length).toBeLessThanOrEqual(70_000)
        expect(() => JSON.parse(text)).not.toThrow()
      }
      await writer.close()
    })

    it('a batch the database refuses is bisected: the one refused event is quarantined, every other row is written', async () => {
      const org = orgId()
      const attempts: number[] = []
      const refusing = failing(store, (batch) => {
        attempts.push(batch.length)
        return batch.some((r) => String(r[1]).endsWith('_poison')) ? Object.assign(new Error('invalid input syntax for type json'), { code: '22P02' }) : undefined
      })
      const writer = createAuditWriter(refusing, { batchSize: 64, logger: quietLogger() })
      const poison = orgId() + '_poison'
      const events = await Promise.all(Array.from({ length: 64 }, (_, i) => writer.emit(i === 37 ? mutation(poison) : mutation(org))))
      expect(await count(org)).toBe(63)
      expect((await quarantined(events[37].id))?.reason).toMatch(/^database_refused: 22P02: invalid input syntax/)
      // log2(64) levels of splitting, not one attempt per event.
      expect(attempts.length).toBeLessThanOrEqual(2 * 7)
      expect(writer.stats()).toMatchObject({ quarantined: 1, retries: 0 })
      await writer.close()
    })

    for (const [name, err] of [
      ['connection refused', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })],
      ['postgres admin shutdown (57P01)', Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' })],
      ['connection terminated', new Error('Connection terminated unexpectedly')],
      ['SQLITE_BUSY', Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' })],
      ['SQLITE_FULL', Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' })],
      ['SQLITE_IOERR_WRITE', Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR_WRITE' })],
    ] as const) {
      it(`a transient failure (${name}) is retried with backoff, never quarantined`, async () => {
        const org = orgId()
        const logged: string[] = []
        let failures = 2
        const flaky = failing(store, () => (failures-- > 0 ? err : undefined))
        const writer = createAuditWriter(flaky, { logger: quietLogger(logged) })
        await Promise.all([writer.emit(mutation(org)), writer.emit(mutation(org))])
        expect(await count(org)).toBe(2)
        expect(logged.filter((m) => m.includes('retrying'))).toHaveLength(2)
        expect(writer.stats()).toMatchObject({ quarantined: 0, retries: 2 })
        await writer.close()
      })
    }

    it('a full queue refuses at once with AuditUnavailableError (503, Retry-After) and loses nothing accepted', async () => {
      const org = orgId()
      let release!: () => void
      const gate = new Promise<void>((r) => (release = r))
      const gated = withInsert(store, async (orig, batch) => {
        await gate
        return orig(batch)
      })
      const writer = createAuditWriter(gated, { batchSize: 5, maxQueue: 20 })
      const accepted = Array.from({ length: 20 }, (_, i) => writer.emit(decision(org, { latency_ms: i })))
      const refused = await writer.emit(decision(org)).then(() => undefined, (e: unknown) => e)
      expect(refused).toBeInstanceOf(AuditUnavailableError)
      expect(refused).toMatchObject({ status: 503, code: 'service_unavailable', retryAfterSeconds: 1, details: { reason: 'audit_unavailable' } })
      expect(writer.stats()).toMatchObject({ rejected: 1, pending: 20 })
      // The same bound in bytes: a writer holding 3 large events refuses the next one.
      const small = createAuditWriter(gated, { maxQueueBytes: 3 * 50_000 })
      const big = () => small.emit(mutation(org, { detail: { blob: 'b'.repeat(50_000) } }))
      const held = [big(), big(), big()]
      await expect(big()).rejects.toBeInstanceOf(AuditUnavailableError)
      release()
      const events = [...(await Promise.all(accepted)), ...(await Promise.all(held))]
      expect((await rows(org)).map((e) => e.id).sort()).toEqual(events.map((e) => e.id).sort())
      await writer.close()
      await small.close()
    })

    it('a caller never hangs while the database is away: emit rejects after durableTimeoutMs, and the event is still written later', async () => {
      const org = orgId()
      let down = true
      const flaky = failing(store, () => (down ? Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) : undefined))
      const writer = createAuditWriter(flaky, { durableTimeoutMs: 200, logger: quietLogger() })
      const err = await writer.emit(mutation(org)).then(() => undefined, (e: unknown) => e)
      expect(err).toBeInstanceOf(AuditUnavailableError)
      expect(err).toMatchObject({ condition: 'timeout', status: 503 })
      down = false
      await expect.poll(() => count(org), { timeout: 10_000 }).toBe(1)
      await writer.close()
    })

    it('close() without a journal gives up after the drain deadline while the database is down, naming the events lost', async () => {
      const org = orgId()
      const logged: string[] = []
      let attempts = 0
      const down = failing(store, () => {
        attempts++
        return Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })
      })
      const writer = createAuditWriter(down, { batchSize: 2, logger: quietLogger(logged), drainTimeoutMs: 150 })
      for (let i = 0; i < 3; i++) void writer.emit(mutation(org))
      const err = await writer.close().then(() => undefined, (e: unknown) => e)
      expect(err).toBeInstanceOf(AuditDrainTimeoutError)
      expect((err as AuditDrainTimeoutError).pending).toBe(3)
      expect(logged.at(-1)).toMatch(/^audit: 3 event\(s\) not persisted.*150 ms/)
      const after = attempts
      await new Promise((r) => setTimeout(r, 300))
      expect(attempts).toBe(after)
      await expect(writer.flush()).rejects.toBeInstanceOf(AuditDrainTimeoutError)
      await expect(writer.emit(mutation(org))).rejects.toThrow(/closed/)
      expect(await count(org)).toBe(0)
    })

    it('announces committed ids on the audit channel, once', async () => {
      const org = orgId()
      const payloads: string[] = []
      const stop = await store.listen(AUDIT_CHANNEL, (p) => p.startsWith(org) && payloads.push(p))
      const writer = createAuditWriter(store)
      const [a, b] = await Promise.all([writer.emit(mutation(org)), writer.emit(mutation(org))])
      await expect.poll(() => payloads.join(' ').split(/[ ,]/).filter((x) => x === a.id || x === b.id).length).toBe(2)
      const before = payloads.length
      // Re-emitting an id already stored announces nothing.
      await writer.emit({ ...mutation(org), id: a.id })
      await writer.close()
      await new Promise((r) => setTimeout(r, 100))
      expect(payloads).toHaveLength(before)
      await stop()
    })
  })
}
