import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AUDIT_CHANNEL, AuditDrainTimeoutError, createAuditWriter, queryAudit, stamp } from '../../src/audit/index.js'
import { CorralError } from '../../src/errors.js'
import type { Store } from '../../src/store/index.js'
import { testDialects } from '../helpers/dialects.js'
import { decision, mutation, orgId } from './fixtures.js'

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const quietLogger = (sink: string[] = []) => ({ error: (_o: object, msg: string) => void sink.push(msg) })

describe('stamp', () => {
  it('fills a UUIDv7 id and a millisecond RFC 3339 UTC timestamp', () => {
    const e = stamp(mutation('org_x'))
    expect(e.id).toMatch(UUID_V7)
    expect(e.timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    expect(stamp({ ...mutation('org_x'), timestamp: '2026-01-01T02:00:00+02:00' }).timestamp).toBe('2026-01-01T00:00:00.000Z')
  })

  it('refuses values outside the closed vocabularies, naming each field', () => {
    const bad = () => stamp({ ...mutation('org_x'), event_type: 'nope' as never, actor: 'robot' as never, reason: 'why' as never, org_id: '' })
    expect(bad).toThrow(CorralError)
    try {
      bad()
    } catch (err) {
      expect((err as CorralError).code).toBe('validation_error')
      expect(Object.keys((err as CorralError).details!.fields as object).sort()).toEqual(['actor', 'event_type', 'org_id', 'reason'])
    }
    expect(() => stamp({ ...mutation('org_x'), latency_ms: 1.5 })).toThrow(/latency_ms/)
    expect(() => stamp({ ...mutation('org_x'), id: 'not-a-uuid' })).toThrow(/id/)
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

    const count = async (org: string) => (await queryAudit(store, org, { limit: 10_000 })).events.length

    it('writes in batches and flush() resolves after commit', async () => {
      const org = orgId()
      const sizes: number[] = []
      const writer = createAuditWriter(spyInserts(store, sizes), { batchSize: 10, flushIntervalMs: 1_000 })
      const emitted = await Promise.all(Array.from({ length: 25 }, (_, i) => writer.emit(decision(org, { latency_ms: i }))))
      await writer.flush()
      expect(await count(org)).toBe(25)
      expect(sizes.every((n) => n <= 10)).toBe(true)
      expect(sizes.reduce((a, b) => a + b, 0)).toBe(25)
      const stored = await store.audit.getById(org, emitted[3].id)
      expect(stored).toEqual(emitted[3])
      await writer.close()
      await expect(writer.emit(decision(org))).rejects.toThrow(/closed/)
    })

    it('a partial batch is written after the flush interval without flush()', async () => {
      const org = orgId()
      const writer = createAuditWriter(store, { batchSize: 100, flushIntervalMs: 5 })
      await writer.emit(mutation(org))
      await expect.poll(() => count(org)).toBe(1)
      await writer.close()
    })

    it('inserts idempotently on id', async () => {
      const org = orgId()
      const writer = createAuditWriter(store)
      const e = await writer.emit(mutation(org))
      await writer.emit({ ...mutation(org), id: e.id, timestamp: e.timestamp })
      await writer.flush()
      expect(await count(org)).toBe(1)
      expect(await store.audit.insertBatch([e, e])).toBe(0)
      expect(await count(org)).toBe(1)
      await writer.close()
    })

    it('applies back-pressure when the queue is full and loses nothing', async () => {
      const org = orgId()
      let release!: () => void
      const gate = new Promise<void>((r) => (release = r))
      const gated = withInsert(store, async (orig, batch) => {
        await gate
        return orig(batch)
      })
      const writer = createAuditWriter(gated, { batchSize: 5, maxQueue: 20, flushIntervalMs: 0 })
      let resolved = 0
      const all = Array.from({ length: 60 }, (_, i) => writer.emit(decision(org, { latency_ms: i })).then((e) => (resolved++, e)))
      // Capacity counts queued and in-flight events: exactly maxQueue producers get through...
      await expect.poll(() => resolved).toBe(20)
      // ...and the rest keep waiting while nothing commits.
      await new Promise((r) => setTimeout(r, 30))
      expect(resolved).toBe(20)
      release()
      const events = await Promise.all(all)
      await writer.close()
      const page = await queryAudit(store, org, { limit: 10_000, order: 'asc' })
      expect(page.events.map((e) => e.id).sort()).toEqual(events.map((e) => e.id).sort())
    })

    it('retries a failed batch with backoff until it commits', async () => {
      const org = orgId()
      const logged: string[] = []
      let failures = 2
      const flaky = withInsert(store, async (orig, batch) => {
        if (failures-- > 0) throw new Error('database went away')
        return orig(batch)
      })
      const writer = createAuditWriter(flaky, { logger: quietLogger(logged) })
      await writer.emit(mutation(org))
      await writer.emit(mutation(org))
      await writer.close()
      expect(await count(org)).toBe(2)
      expect(logged.filter((m) => m.includes('retrying'))).toHaveLength(2)
    })

    it('close() gives up after the drain deadline while the database is down, naming the events not persisted', async () => {
      const org = orgId()
      const logged: string[] = []
      let attempts = 0
      const down = withInsert(store, async () => {
        attempts++
        throw new Error('database went away')
      })
      const writer = createAuditWriter(down, { batchSize: 2, logger: quietLogger(logged), drainTimeoutMs: 150 })
      for (let i = 0; i < 3; i++) await writer.emit(mutation(org))
      const err = await writer.close().then(() => undefined, (e: unknown) => e)
      expect(err).toBeInstanceOf(AuditDrainTimeoutError)
      expect((err as AuditDrainTimeoutError).pending).toBe(3)
      expect(logged.at(-1)).toMatch(/^audit: 3 event\(s\) not persisted.*150 ms/)
      // Retries stop: nothing keeps the process alive or busy after the deadline.
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
      const a = await writer.emit(mutation(org))
      const b = await writer.emit(mutation(org))
      await writer.flush()
      await expect.poll(() => payloads.length).toBe(1)
      expect(payloads[0]).toBe(`${org} ${a.id},${b.id}`)
      // Re-emitting an id already stored announces nothing.
      await writer.emit({ ...mutation(org), id: a.id })
      await writer.close()
      await new Promise((r) => setTimeout(r, 100))
      expect(payloads).toHaveLength(1)
      await stop()
    })
  })
}

type InsertFn = Store['audit']['insertBatchReturningIds']

/** A Store whose audit insert goes through `wrap` (the rest is the real store). */
function withInsert(store: Store, wrap: (orig: InsertFn, batch: Parameters<InsertFn>[0]) => ReturnType<InsertFn>): Store {
  const orig: InsertFn = (batch) => store.audit.insertBatchReturningIds(batch)
  return { ...store, audit: { ...store.audit, insertBatchReturningIds: (batch) => wrap(orig, batch) } }
}

function spyInserts(store: Store, sizes: number[]): Store {
  return withInsert(store, (orig, batch) => {
    sizes.push(batch.length)
    return orig(batch)
  })
}
