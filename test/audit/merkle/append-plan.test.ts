// The log's reads reach rows by key whatever the planner's statistics say (docs/audit.md "Catch-up
// at the cost of a lookup"). A new store's open analyzes its tables while audit_events holds a row
// or none; from those statistics SQLite planned the appender's read of the queue (and
// verification's read of the leaves) as a scan of the whole of audit_events per queued row, which
// made every append round cost rows × table and let the log fall further behind the more it held.
// Here the statistics are taken as an open takes them, rows are written after, and every statement
// the appender and verification run against the joined tables must look each row up through an
// index: their query plans are read from SQLite itself. On PostgreSQL (whose planner sees the
// tables' real size) the same rounds append every row in order and verify.
import Database from 'better-sqlite3'
import { afterEach, describe, expect, it } from 'vitest'
import { databaseInput, ProvableLog, verifyLog } from '../../../src/audit/index.js'
import { openLeafReader, type Store } from '../../../src/store/index.js'
import { openSibling, storeTarget, testDialects } from '../../helpers/dialects.js'
import { quietLogger } from '../writer-helpers.js'
import { logFixture } from './log-harness.js'

/** Every SQL text this process prepares through better-sqlite3 while `record` is on. */
const prepared: string[] = []
const realPrepare = Database.prototype.prepare
function record(on: boolean): void {
  Database.prototype.prepare = on
    ? function (this: Database.Database, text: string) {
        prepared.push(text)
        return realPrepare.call(this, text)
      } as typeof realPrepare
    : realPrepare
}
afterEach(() => record(false))

/** The plan's steps that read audit_events or audit_log_leaves row by row instead of through an index. */
function scans(file: string, text: string): string[] {
  const db = new Database(file, { readonly: true })
  try {
    const stmt = db.prepare(`EXPLAIN QUERY PLAN ${text}`)
    const params = Array.from({ length: (text.match(/\?/g) ?? []).length }, () => null)
    const plan = (stmt.all(...params) as Array<{ detail: string }>).map((r) => r.detail)
    return plan.filter((d) => /^SCAN (e|l|audit_events|audit_log_leaves)\b/.test(d))
  } finally {
    db.close()
  }
}

async function appendAndVerify(store: Store, org: string, witness: string): Promise<{ added: number; ok: boolean }> {
  const log = new ProvableLog({ store, logger: quietLogger(), batch: 40 })
  const added = await log.append()
  const report = await verifyLog(await databaseInput(store, org, { witness }))
  return { added, ok: report.ok }
}

for (const d of testDialects()) {
  describe(`the log's reads by key under stale statistics [${d.name}]`, () => {
    it('the appender and verification look rows up through an index, and the log catches up whole', async () => {
      const first = await d.open()
      const f = await logFixture(first)
      await f.write(1, 'seed')
      await f.log.checkpoint()
      const target = storeTarget(first)!
      const file = target.url.replace(/^sqlite:/, '')
      if (d.name === 'sqlite') {
        // What a store's open does with a table it has not analyzed yet (PRAGMA optimize), while the log holds one row.
        const db = new Database(file)
        db.exec('ANALYZE audit_events; ANALYZE audit_log_leaves')
        const stat = db.prepare(`SELECT stat FROM sqlite_stat1 WHERE tbl = 'audit_events' AND idx = 'sqlite_autoindex_audit_events_1'`).get() as { stat: string }
        db.close()
        expect(stat.stat.split(' ')[0]).toBe('1')
      }
      // Rows written after the statistics, several append rounds' worth.
      await f.write(150, 'after')
      record(true)
      const store = await openSibling(first)
      const { added, ok } = await appendAndVerify(store, f.org, f.witnessDir)
      // Verification's read of the rows in no leaf (run when the counts differ; the API's too).
      expect(await store.auditLog.unlogged(f.org)).toEqual([])
      await f.log.checkpoint()
      const reader = d.name === 'sqlite' ? await openLeafReader(target.url) : undefined
      if (reader) {
        let rows = 0
        await reader.range(f.org, 0, 151, { begin: () => {}, row: () => void rows++ })
        await reader.close()
        expect(rows).toBe(151)
      }
      record(false)
      expect(added).toBe(150)
      expect(ok).toBe(true)
      expect((await f.verify()).ok).toBe(true)
      expect(await f.ids()).toHaveLength(151)
      if (d.name === 'sqlite') {
        const joins = [...new Set(prepared)].filter((t) => /audit_events/.test(t) && /audit_log_(leaves|pending)/.test(t))
        // The appender's read of the queue, verification's reads of the leaves (the store's and the reader's) and of the rows in none.
        expect(joins.filter((t) => /audit_log_pending/.test(t)).length).toBeGreaterThan(0)
        expect(joins.filter((t) => /FROM audit_log_leaves/.test(t)).length).toBeGreaterThanOrEqual(2)
        expect(joins.filter((t) => /not exists/i.test(t)).length).toBe(1)
        for (const t of joins) expect({ statement: t, scans: scans(file, t) }).toEqual({ statement: t, scans: [] })
      }
    })
  })
}
