import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AUDIT_CHANNEL, createAuditBus, createAuditWriter, stamp } from '../../src/audit/index.js'
import type { AuditEvent } from '../../src/contract/index.js'
import { publishCommitted } from '../../src/audit/notify.js'
import { sql } from 'kysely'
import type { Store } from '../../src/store/index.js'
import { openSibling, testDialects } from '../helpers/dialects.js'
import { decision, mutation, orgId } from './fixtures.js'

for (const d of testDialects()) {
  describe(`audit bus [${d.name}]`, () => {
    let store: Store
    beforeAll(async () => {
      store = await d.open()
    })
    afterAll(async () => {
      await store.close()
    })

    it('delivers committed events of the subscribed org, in commit order, with filters', async () => {
      const bus = createAuditBus(store)
      await bus.ready
      const org = orgId()
      const all: AuditEvent[] = []
      const ws: AuditEvent[] = []
      const mine: AuditEvent[] = []
      const stops = [
        bus.subscribe(org, (e) => all.push(e)),
        bus.subscribe(org, (e) => ws.push(e), { workspaceId: 'ws_9' }),
        bus.subscribe(org, (e) => mine.push(e), { userId: 'usr_me' }),
      ]
      const writer = createAuditWriter(store, { batchSize: 3 })
      const emitted: AuditEvent[] = []
      for (let i = 0; i < 10; i++) {
        emitted.push(await writer.emit(decision(org, { workspace_id: i % 2 ? 'ws_9' : 'ws_1', user_id: i % 5 === 0 ? 'usr_me' : 'usr_1' })))
      }
      await writer.emit(mutation(orgId())) // another org: never delivered here
      await writer.flush()
      await expect.poll(() => all.length).toBe(10)
      expect(all.map((e) => e.id)).toEqual(emitted.map((e) => e.id))
      expect(all[0]).toEqual(emitted[0])
      expect(ws.map((e) => e.id)).toEqual(emitted.filter((e) => e.workspace_id === 'ws_9').map((e) => e.id))
      expect(mine.map((e) => e.id)).toEqual(emitted.filter((e) => e.user_id === 'usr_me').map((e) => e.id))

      // Unsubscribed handlers get nothing more.
      for (const stop of stops) stop()
      await writer.emit(decision(org))
      await writer.close()
      await new Promise((r) => setTimeout(r, 50))
      expect(all).toHaveLength(10)
      await bus.close()
    })

    it('a subscriber that throws does not stop delivery to others', async () => {
      const errors: string[] = []
      const bus = createAuditBus(store, { logger: { error: (_o, m) => void errors.push(m) } })
      await bus.ready
      const org = orgId()
      const got: string[] = []
      bus.subscribe(org, () => {
        throw new Error('bad subscriber')
      })
      bus.subscribe(org, (e) => got.push(e.id))
      const writer = createAuditWriter(store)
      const e = await writer.emit(mutation(org))
      await writer.close()
      await expect.poll(() => got).toEqual([e.id])
      expect(errors).toContain('audit bus: subscriber threw')
      await bus.close()
    })

    it('announces big batches in chunks that fit a NOTIFY payload', async () => {
      const org = orgId()
      const batch = Array.from({ length: 1000 }, () => stamp(mutation(org)))
      const payloads: string[] = []
      const stop = await store.listen(AUDIT_CHANNEL, (p) => p.startsWith(org) && payloads.push(p))
      await publishCommitted(store, batch, batch.map((e) => e.id))
      await expect.poll(() => payloads.length).toBeGreaterThan(4)
      await new Promise((r) => setTimeout(r, 50))
      expect(payloads.every((p) => Buffer.byteLength(p) < 8000)).toBe(true)
      expect(payloads.flatMap((p) => p.split(' ')[1].split(','))).toEqual(batch.map((e) => e.id))
      await stop()
    })

    if (d.name === 'postgres') {
      it('recovers when the LISTEN connection is dropped', async () => {
        const bus = createAuditBus(store)
        await bus.ready
        const org = orgId()
        const got: string[] = []
        bus.subscribe(org, (e) => got.push(e.id))
        const writer = createAuditWriter(store)
        const before = await writer.emit(mutation(org))
        await writer.flush()
        await expect.poll(() => got).toEqual([before.id])
        // Only this store's listener: its application_name carries the test schema.
        const killed = await sql<{ n: number }>`SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
          WHERE application_name = 'corral-listen:' || current_schema() AND datname = current_database()`.execute(store.db)
        expect(killed.rows[0].n).toBeGreaterThan(0)
        // Keep emitting until the re-established LISTEN hears one (events during the gap are in the log).
        await expect
          .poll(async () => {
            await writer.emit(mutation(org))
            await writer.flush()
            return got.length
          }, { timeout: 15_000, interval: 200 })
          .toBeGreaterThan(1)
        await writer.close()
        await bus.close()
      })

      it('fans out across processes: events written through one store reach the bus of another', async () => {
        const other = await openSibling(store)
        const busHere = createAuditBus(store)
        const busThere = createAuditBus(other)
        await Promise.all([busHere.ready, busThere.ready])
        const org = orgId()
        const here: string[] = []
        const there: string[] = []
        busHere.subscribe(org, (e) => here.push(e.id))
        busThere.subscribe(org, (e) => there.push(e.id))
        // Two writers, one per "process", and a batch bigger than one NOTIFY payload can carry.
        const w1 = createAuditWriter(store, { batchSize: 400 })
        const w2 = createAuditWriter(other, { batchSize: 400 })
        const ids: string[] = []
        for (let i = 0; i < 400; i++) ids.push((await (i % 2 ? w1 : w2).emit(decision(org))).id)
        await Promise.all([w1.close(), w2.close()])
        await expect.poll(() => there.length, { timeout: 10_000 }).toBe(400)
        await expect.poll(() => here.length, { timeout: 10_000 }).toBe(400)
        expect(new Set(there)).toEqual(new Set(ids))
        expect(new Set(here)).toEqual(new Set(ids))
        await Promise.all([busHere.close(), busThere.close()])
        await other.close()
      })
    }
  })
}
