// The primary's one audit writer for `corral proxy --workers N` on SQLite
// (src/serve/proxy-workers-rows.ts), with a real store: batches handed over by several workers while
// one insert runs are inserted together, each worker is answered with exactly the new ids of its own
// rows, and a batch the database refuses fails only the worker that sent it (its audit writer then
// splits it and quarantines the bad row) while every other worker's rows are stored.
// The processes themselves (a worker killed with -9, the primary killed -9): test/e2e/proxy-workers.test.ts.
import { EventEmitter } from 'node:events'
import type { Worker } from 'node:cluster'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { classifyFailure } from '../../src/audit/classify.js'
import { stamp } from '../../src/audit/index.js'
import { RowsWriter } from '../../src/serve/proxy-workers-rows.js'
import type { Store } from '../../src/store/index.js'
import { decision, mutation, orgId } from '../audit/fixtures.js'
import { testDialects } from '../helpers/dialects.js'

const lineOf = (e: object & { timestamp: string }, drop: string[] = []): string => {
  const o: Record<string, unknown> = { ts: Date.parse(e.timestamp), ...e }
  for (const k of drop) delete o[k]
  return JSON.stringify(o)
}

interface Reply { type: string; n: number; ids?: string[]; error?: { message: string; code?: string } }

/** A cluster worker as the writer sees one: messages in, replies out. */
class FakeWorker extends EventEmitter {
  readonly replies: Reply[] = []
  isConnected(): boolean {
    return true
  }
  send(m: Reply, _handle?: unknown, cb?: () => void): boolean {
    this.replies.push(m)
    cb?.()
    return true
  }
  hand(n: number, lines: string[]): void {
    this.emit('message', { type: 'corral-proxy-rows', n, lines })
  }
}

for (const d of testDialects()) {
  describe(`the workers' one audit writer [${d.name}]`, () => {
    let store: Store
    beforeAll(async () => {
      store = await d.open()
    })
    afterAll(async () => {
      await store.close()
    })

    const stored = async (org: string) => (await store.db.selectFrom('audit_events').select('id').where('org_id', '=', org).execute()).map((r) => String(r.id)).sort()

    it('merges batches that arrive during an insert and answers each worker with the new ids of its own rows only', async () => {
      const org = orgId()
      const writer = new RowsWriter(store)
      const [a, b, c] = [new FakeWorker(), new FakeWorker(), new FakeWorker()]
      for (const w of [a, b, c]) writer.attach(w as unknown as Worker)
      const rows = (n: number) => Array.from({ length: n }, (_, i) => stamp(i % 2 ? decision(org) : mutation(org)))
      const [ra, rb, rc] = [rows(3), rows(4), rows(5)]
      // A's batch starts an insert; B's and C's arrive while it runs and go in together.
      a.hand(1, ra.map((e) => lineOf(e)))
      b.hand(7, [...rb.map((e) => lineOf(e)), lineOf(ra[0]!)])
      c.hand(9, rc.map((e) => lineOf(e)))
      await writer.idle()
      expect(a.replies).toEqual([{ type: 'corral-proxy-rows-stored', n: 1, ids: ra.map((e) => e.id) }])
      // B repeated A's first row: already stored, so not new, and not B's to count.
      expect(b.replies).toEqual([{ type: 'corral-proxy-rows-stored', n: 7, ids: rb.map((e) => e.id) }])
      expect(c.replies).toEqual([{ type: 'corral-proxy-rows-stored', n: 9, ids: rc.map((e) => e.id) }])
      expect(await stored(org)).toEqual([...ra, ...rb, ...rc].map((e) => e.id).sort())
    })

    it("a refused row fails only its own worker's batch, with the database's error (a data error); the others' rows are stored", async () => {
      const org = orgId()
      const writer = new RowsWriter(store)
      const [a, b, c] = [new FakeWorker(), new FakeWorker(), new FakeWorker()]
      for (const w of [a, b, c]) writer.attach(w as unknown as Worker)
      const [ra, rb, rc] = [[stamp(mutation(org))], [stamp(decision(org)), stamp(mutation(org))], [stamp(decision(org)), stamp(mutation(org))]]
      a.hand(1, ra.map((e) => lineOf(e)))
      // B's second row has no user_id: the database refuses it, and with it the merged insert.
      b.hand(2, [lineOf(rb[0]!), lineOf(rb[1]!, ['user_id'])])
      c.hand(3, rc.map((e) => lineOf(e)))
      await writer.idle()
      expect(a.replies.map((r) => r.ids)).toEqual([ra.map((e) => e.id)])
      expect(c.replies.map((r) => r.ids?.sort())).toEqual([rc.map((e) => e.id).sort()])
      expect(b.replies).toHaveLength(1)
      const refused = b.replies[0]!
      expect(refused.ids).toBeUndefined()
      expect(refused.error?.message).toBeTruthy()
      // Rebuilt in the worker as the database's own error: its writer splits the batch, not retries it.
      expect(classifyFailure(Object.assign(new Error(refused.error!.message), refused.error!.code ? { code: refused.error!.code } : {}))).toBe('data')
      expect(await stored(org)).toEqual([...ra, ...rc].map((e) => e.id).sort())
    })
  })
}
