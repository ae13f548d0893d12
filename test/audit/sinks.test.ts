// The audit sinks against a real OTLP/HTTP receiver (test/audit/otlp-receiver.ts decodes with
// protobufjs and the OTLP .proto files): every row arrives once, in commit order, with its
// resource and attributes; a receiver that is down, failing, throttling, stalling or partially
// accepting loses nothing; the cursor and the lease live in the store (both dialects).
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Ajv } from 'ajv'
import pino from 'pino'
import { afterEach, describe, expect, it } from 'vitest'
import { AuditShipper, createAuditWriter, stamp, type AuditSinkConfig } from '../../src/audit/index.js'
import type { AuditEvent } from '../../src/contract/index.js'
import { auditSinkCursors, openStore, type Store } from '../../src/store/index.js'
import { describePostgres, testDialects } from '../helpers/dialects.js'
import { decision, mutation, orgId } from './fixtures.js'
import { OCSF_EVENT_SCHEMA } from './ocsf-schema.js'
import { OtlpReceiver } from './otlp-receiver.js'

const logger = pino({ level: 'silent' })
const validateOcsf = new Ajv({ strict: false }).compile(OCSF_EVENT_SCHEMA)

function sinkConfig(url: string, over: Partial<AuditSinkConfig> = {}): AuditSinkConfig {
  return { name: 'otlp', kind: 'otlp', url, headers: { authorization: 'Bearer t0k' }, encoding: 'protobuf', batchSize: 7, timeoutMs: 2_000, ...over }
}

async function until(cond: () => boolean | Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  const end = Date.now() + ms
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

async function emitRows(store: Store, n: number, org = orgId()): Promise<AuditEvent[]> {
  const writer = createAuditWriter(store)
  const out: AuditEvent[] = []
  for (let i = 0; i < n; i++) out.push(await writer.emit(i % 3 === 2 ? mutation(org) : decision(org, { decision: i % 2 ? 'deny' : 'allow', reason: i % 2 ? 'no_match' : undefined })))
  await writer.close()
  return out
}

for (const d of testDialects()) {
  describe(`audit sinks: OTLP [${d.name}]`, () => {
    const cleanup: Array<() => Promise<unknown>> = []
    afterEach(async () => {
      for (const c of cleanup.splice(0).reverse()) await c()
    })
    async function setup(opts: { receiver?: boolean; sink?: Partial<AuditSinkConfig> } = {}) {
      const store = await d.open()
      cleanup.push(() => store.close())
      const receiver = await OtlpReceiver.start()
      cleanup.push(() => receiver.close())
      if (opts.receiver === false) await receiver.close()
      const shipper = (holder = 'rep_a') => {
        const s = new AuditShipper({ store, sink: sinkConfig(receiver.url, opts.sink), holder, logger, resource: { instanceId: holder, deployment: 'test' }, pollMs: 20, leaseTtlMs: 2_000 })
        cleanup.push(() => s.stop())
        return s
      }
      return { store, receiver, shipper }
    }

    it('ships every row once as a LogRecord a real OTLP decoder reads: resource, time, severity, attributes, the row as body', async () => {
      const { store, receiver, shipper } = await setup()
      const org = orgId()
      const rows = await emitRows(store, 20, org)
      shipper().start()
      await until(() => receiver.ids().length === 20, '20 records')
      expect(receiver.records).toHaveLength(20)
      expect(receiver.ids()).toEqual(rows.map((r) => r.id))
      const [first] = receiver.records
      expect(first!.resource).toEqual({
        'service.name': 'corral', 'service.instance.id': 'rep_a', 'corral.org_id': org, 'corral.audit.scope': 'org', 'deployment.environment.name': 'test',
      })
      expect(first!.scope).toBe('corral.audit')
      for (const [i, rec] of receiver.records.entries()) {
        const row = rows[i]!
        expect(rec.timeUnixNano).toBe(BigInt(Date.parse(row.timestamp)) * 1_000_000n)
        expect(rec.severityNumber).toBe(row.decision === 'deny' ? 13 : 9)
        expect(rec.eventName).toBe(`corral.audit.${row.event_type}`)
        expect(rec.attributes['corral.audit.event_id']).toBe(row.id)
        expect(rec.attributes['corral.audit.org_id']).toBe(org)
        if (row.latency_ms !== undefined) expect(rec.attributes['corral.audit.latency_ms']).toBe(row.latency_ms)
        expect(rec.body).toEqual(row)
      }
      await until(async () => (await auditSinkCursors(store).get('otlp'))?.shipped === 20, 'the cursor at 20')
    })

    it('OTLP/JSON: the request is valid against the proto JSON mapping (protobufjs fromObject + verify)', async () => {
      const { store, receiver, shipper } = await setup({ sink: { encoding: 'json' } })
      const rows = await emitRows(store, 9)
      shipper().start()
      await until(() => receiver.ids().length === 9, '9 records')
      expect(receiver.ids()).toEqual(rows.map((r) => r.id))
      expect(receiver.records.map((r) => r.body)).toEqual(rows)
    })

    it('a receiver that is down, then up, gets every row once and in order; a restarted shipper resends nothing', async () => {
      // A deadline no loaded machine reaches: a timed-out batch is legitimately sent again (at least once).
      const { store, receiver, shipper } = await setup({ receiver: false, sink: { timeoutMs: 60_000 } })
      const rows = await emitRows(store, 15)
      const a = shipper()
      a.start()
      await until(() => a.stats().retries >= 2, 'retries while the receiver is down')
      expect((await auditSinkCursors(store).get('otlp'))?.shipped).toBe(0)
      await receiver.listen()
      await until(() => receiver.ids().length === 15, '15 records')
      // The receiver holding a batch is not the cursor past it: a stop before the 2xx is read resends that batch.
      await until(async () => (await auditSinkCursors(store).get('otlp'))?.shipped === 15, 'cursor at 15')
      await a.stop()
      expect(receiver.records.map((r) => r.attributes['corral.audit.event_id'])).toEqual(rows.map((r) => r.id))
      const more = await emitRows(store, 4)
      const b = shipper('rep_b')
      b.start()
      await until(() => receiver.ids().length === 19, '19 records')
      expect(receiver.records.map((r) => r.attributes['corral.audit.event_id'])).toEqual([...rows, ...more].map((r) => r.id))
    })

    it('500s and 429s (Retry-After honoured) hold the cursor until a 2xx; nothing is lost or repeated', async () => {
      const { store, receiver, shipper } = await setup()
      receiver.mode = { kind: 'status', status: 500, times: 3 }
      const rows = await emitRows(store, 10)
      const s = shipper()
      s.start()
      await until(() => receiver.ids().length === 10, '10 records after 500s')
      receiver.mode = { kind: 'status', status: 429, retryAfter: '0', times: 2 }
      const more = await emitRows(store, 5)
      await until(() => receiver.ids().length === 15, '15 records after 429s')
      expect(receiver.refused).toEqual([500, 500, 500, 429, 429])
      expect(receiver.records.map((r) => r.attributes['corral.audit.event_id'])).toEqual([...rows, ...more].map((r) => r.id))
      await until(() => s.stats().shipped === 15, 'shipped 15')
      expect(s.stats()).toMatchObject({ retries: 5, rejected: 0, leader: true })
    })

    it('a receiver slower than the deadline: the rows are sent again (at least once), no row is missing, duplicates carry the same event id', async () => {
      const { store, receiver, shipper } = await setup({ sink: { timeoutMs: 300 } })
      receiver.mode = { kind: 'stall', ms: 1_000, times: 1 }
      const rows = await emitRows(store, 6)
      const s = shipper()
      s.start()
      await until(async () => (await auditSinkCursors(store).get('otlp'))?.shipped === 6, 'cursor at 6')
      expect(receiver.ids()).toEqual(rows.map((r) => r.id))
      // The stalled request's records arrived and were sent again: the same ids, once more, in the same order.
      expect(receiver.records.map((r) => r.attributes['corral.audit.event_id'])).toEqual([...rows, ...rows].map((r) => r.id))
    })

    it('a slow receiver within the deadline gets each row exactly once', async () => {
      const { store, receiver, shipper } = await setup({ sink: { timeoutMs: 5_000 } })
      receiver.mode = { kind: 'stall', ms: 400, times: 2 }
      const rows = await emitRows(store, 10)
      shipper().start()
      await until(async () => (await auditSinkCursors(store).get('otlp'))?.shipped === 10, 'cursor at 10')
      expect(receiver.records.map((r) => r.attributes['corral.audit.event_id'])).toEqual(rows.map((r) => r.id))
    })

    it('partial_success: the rejected count is reported and the rows are not resent (OTLP: rejected records must not be retried)', async () => {
      const { store, receiver, shipper } = await setup()
      receiver.mode = { kind: 'partial', rejected: 2, times: 1 }
      await emitRows(store, 7)
      const s = shipper()
      s.start()
      await until(async () => (await auditSinkCursors(store).get('otlp'))?.shipped === 7, 'cursor at 7')
      expect(receiver.requests).toBe(1)
      expect(s.stats()).toMatchObject({ shipped: 7, rejected: 2 })
    })

    it('two replicas: one holds the lease and ships; when it stops the other takes over from the stored cursor, no gap and no duplicate', async () => {
      const { store, receiver, shipper } = await setup()
      const rows = await emitRows(store, 10)
      const a = shipper('rep_a')
      const b = shipper('rep_b')
      a.start()
      await until(() => a.stats().leader, 'a leads')
      b.start()
      await until(() => receiver.ids().length === 10, '10 records')
      expect(b.stats().leader).toBe(false)
      await a.stop()
      const more = await emitRows(store, 8)
      await until(() => receiver.ids().length === 18, '18 records')
      expect(b.stats().leader).toBe(true)
      expect(receiver.records.map((r) => r.attributes['corral.audit.event_id'])).toEqual([...rows, ...more].map((r) => r.id))
    })

    it('the OCSF sink posts each row as one OCSF event line (valid against the class schema), once, in order, after a 503', async () => {
      const { store } = await setup()
      const lines: Array<Record<string, unknown>> = []
      let fail = 1
      const server = createServer((req, res) => {
        const chunks: Buffer[] = []
        req.on('data', (c: Buffer) => chunks.push(c)).on('end', () => {
          if (fail-- > 0) return void res.writeHead(503).end()
          expect(req.headers['content-type']).toBe('application/x-ndjson')
          for (const l of Buffer.concat(chunks).toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Record<string, unknown>)
          res.writeHead(204).end()
        })
      })
      await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok))
      cleanup.push(() => new Promise((ok) => server.close(ok)))
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/ingest`
      const rows = await emitRows(store, 9)
      const s = new AuditShipper({ store, sink: sinkConfig(url, { kind: 'ocsf', name: 'ocsf', encoding: 'json' }), holder: 'rep_a', logger, resource: { instanceId: 'rep_a' }, pollMs: 20 })
      cleanup.push(() => s.stop())
      s.start()
      await until(async () => (await auditSinkCursors(store).get('ocsf'))?.shipped === 9, 'the OCSF cursor at 9')
      expect(lines.map((l) => (l.metadata as { uid: string }).uid)).toEqual(rows.map((r) => r.id))
      for (const l of lines) expect(validateOcsf(l)).toBe(true)
      expect((await auditSinkCursors(store).get('otlp'))).toBeUndefined()
    })

    it('a lease taken over while a request is in flight: the old holder cannot move the cursor', async () => {
      const { store } = await setup()
      const c = auditSinkCursors(store)
      expect(await c.claim('otlp', 'rep_a', 1_000, 100)).toBe(true)
      expect(await c.claim('otlp', 'rep_b', 1_050, 100)).toBe(false)
      expect(await c.claim('otlp', 'rep_b', 1_200, 100)).toBe(true)
      expect(await c.advance('otlp', 'rep_a', { tx: 0, seq: 0 }, { tx: 0, seq: 5 }, 5, 1_210, 100)).toBe(false)
      expect(await c.advance('otlp', 'rep_b', { tx: 0, seq: 0 }, { tx: 0, seq: 5 }, 5, 1_210, 100)).toBe(true)
      expect(await c.advance('otlp', 'rep_b', { tx: 0, seq: 0 }, { tx: 0, seq: 9 }, 4, 1_220, 100)).toBe(false)
      expect((await c.get('otlp'))?.position).toEqual({ tx: 0, seq: 5 })
    })
  })
}

describePostgres('audit sinks: commit order on PostgreSQL', (url) => {
  it('a row committed after a later-numbered one is still shipped: the cursor never passes a transaction that is still open', async () => {
    const store = await openStore(url, { schema: `sinks_${Math.random().toString(36).slice(2, 10)}` })
    const receiver = await OtlpReceiver.start()
    const s = new AuditShipper({ store, sink: sinkConfig(receiver.url), holder: 'rep_a', logger, resource: { instanceId: 'rep_a' }, pollMs: 20 })
    try {
      s.start()
      const org = orgId()
      let release!: () => void
      const gate = new Promise<void>((r) => (release = r))
      let inserted!: () => void
      const insertedP = new Promise<void>((r) => (inserted = r))
      const a = stamp(decision(org, { path: '/a' }))
      const open = store.transaction(async (tx) => {
        await tx.audit.insertBatchReturningIds([a])
        inserted()
        await gate
      })
      await insertedP
      const [b] = await emitRows(store, 1, org)
      // B is committed and numbered after A, but A's transaction is still open: B must wait for it.
      await until(() => s.stats().leader, 'the lease')
      await new Promise((r) => setTimeout(r, 300))
      expect(receiver.ids()).toEqual([])
      release()
      await open
      await until(() => receiver.ids().length === 2, 'both rows')
      expect(receiver.ids()).toEqual([a.id, b!.id])
    } finally {
      await s.stop()
      await receiver.close()
      await store.close()
    }
  })
})
