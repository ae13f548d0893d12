// The appender yields to the writer (docs/audit.md "Pacing: the appender yields to the writer"),
// on both dialects, on the caller's thread and on the appender's own thread as serve runs it:
// while the writer has a backlog and the lag is within its bounds a paced append takes no lock on
// the log's tables (a connection holding them does not stop it) and adds nothing; past the bound in
// rows it appends down to the bound, past the bound in seconds it appends what is queued; once the
// writer is idle it catches up, in commit order, and a checkpoint covers every row.
import Database from 'better-sqlite3'
import pg from 'pg'
import { describe, expect, it, vi } from 'vitest'
import { createAuditWriter } from '../../../src/audit/index.js'
import type { Store } from '../../../src/store/index.js'
import { storeTarget, testDialects } from '../../helpers/dialects.js'
import { decision } from '../fixtures.js'
import { quietLogger } from '../writer-helpers.js'
import { APPENDER_MODES, errors, logFixture, logOn } from './log-harness.js'

/** Holds what an append would lock (SQLite: the write lock; PostgreSQL: the log's tables against writes) until released. */
async function holdLogLocks(store: Store): Promise<() => Promise<void>> {
  const target = storeTarget(store)!
  if (store.dialect === 'sqlite') {
    const db = new Database(target.url.replace(/^sqlite:/, ''))
    db.exec('BEGIN IMMEDIATE')
    return async () => {
      db.exec('ROLLBACK')
      db.close()
    }
  }
  const client = new pg.Client({ connectionString: target.url })
  await client.connect()
  await client.query('BEGIN')
  await client.query(`SET LOCAL search_path = "${target.schema}"`)
  await client.query('LOCK TABLE audit_log_trees, audit_log_leaves IN EXCLUSIVE MODE')
  return async () => {
    await client.query('ROLLBACK')
    await client.end()
  }
}

for (const d of testDialects()) {
  for (const mode of APPENDER_MODES) {
    describe(`appender pacing [${d.name}, ${mode.name}]`, () => {
      const pacedLog = (store: Store, busy: () => boolean, pace: { maxLagRows?: number; maxLagMs?: number }, batch?: number) =>
        logOn(mode, store, { writerBusy: busy, pace, ...(batch ? { batch } : {}) })

      it('takes no lock and appends nothing while the writer has a backlog below the bound, and catches up once it is idle', async () => {
        const f = await logFixture(await d.open())
        let busy = true
        const log = pacedLog(f.store, () => busy, { maxLagRows: 1_000, maxLagMs: 3_600_000 })
        try {
          await f.write(100)
          const release = await holdLogLocks(f.store)
          try {
            // With the log's tables locked by another connection, a round would wait (or fail
            // with "database is locked"): a paced append must resolve without one.
            expect(await log.append({ paced: true })).toBe(0)
            expect(await log.append({ paced: true })).toBe(0)
          } finally {
            await release()
          }
          expect((await f.store.auditLog.pending(1_000)).length).toBe(100)
          expect((await f.store.auditLog.tree(f.org))?.size ?? 0).toBe(0)

          busy = false
          expect(await log.append({ paced: true })).toBe(100)
          expect(await f.store.auditLog.pending(10)).toEqual([])
          await f.log.checkpoint()
          expect(errors(await f.verify())).toEqual([])
          expect((await f.store.auditLog.latestCheckpoint(f.org))?.size).toBe(100)
        } finally {
          await log.stop()
        }
      })

      it('a backlog that never ends cannot starve the log: past the bound in rows it appends down to the bound', async () => {
        const f = await logFixture(await d.open())
        let busy = true
        const log = pacedLog(f.store, () => busy, { maxLagRows: 50, maxLagMs: 3_600_000 }, 16)
        try {
          await f.write(30, 'a')
          expect(await log.append({ paced: true })).toBe(0)
          await f.write(90, 'b')
          const added = await log.append({ paced: true })
          const left = (await f.store.auditLog.pending(1_000)).length
          expect(added + left).toBe(120)
          expect(left).toBeLessThan(50)
          expect(left).toBeGreaterThan(0)

          busy = false
          expect(await log.append({ paced: true })).toBe(left)
          const written = (await f.store.auditLog.leafRows(f.org, 0, 1_000)).map((r) => String(r.path))
          expect(written).toEqual([...Array.from({ length: 30 }, (_, i) => `/a/${i}`), ...Array.from({ length: 90 }, (_, i) => `/b/${30 + i}`)])
          await f.log.checkpoint()
          expect(errors(await f.verify())).toEqual([])
        } finally {
          await log.stop()
        }
      })

      it('past the bound in seconds it appends what is queued, though the writer is still busy', async () => {
        const f = await logFixture(await d.open())
        const log = pacedLog(f.store, () => true, { maxLagRows: 1_000_000, maxLagMs: 300 })
        try {
          await f.write(30)
          // The first look starts the clock of these rows' wait.
          expect(await log.append({ paced: true })).toBe(0)
          let added = 0
          await vi.waitFor(async () => {
            added += await log.append({ paced: true })
            expect(added).toBe(30)
          }, { timeout: 15_000, interval: 100 })
          expect(await f.store.auditLog.pending(10)).toEqual([])
          // An on-demand checkpoint is never held back.
          await f.write(5)
          const [cp] = await f.log.checkpoint()
          expect(cp?.size).toBe(35)
          expect(errors(await f.verify())).toEqual([])
        } finally {
          await log.stop()
        }
      })
    })
  }

  describe(`the writer's backlog [${d.name}]`, () => {
    it('is a full batch or more not yet in the database, and ends when the batches are committed', async () => {
      const store = await d.open()
      const writer = createAuditWriter(store, { logger: quietLogger(), batchSize: 10 })
      expect(writer.backlogged()).toBe(false)
      const org = 'org_backlog'
      const all = Array.from({ length: 5 }, (_, i) => writer.emit(decision(org, { path: `/${i}` })))
      expect(writer.backlogged()).toBe(false)
      all.push(...Array.from({ length: 45 }, (_, i) => writer.emit(decision(org, { path: `/${5 + i}` }))))
      expect(writer.backlogged()).toBe(true)
      await Promise.all(all)
      await writer.flush()
      expect(writer.backlogged()).toBe(false)
      await writer.close()
    })
  })
}
