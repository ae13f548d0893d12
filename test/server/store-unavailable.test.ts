// SQLite locked by another process past the busy timeout, or full (SQLITE_FULL): the API
// answers 503 service_unavailable with Retry-After instead of a 500, and the next request after
// the lock is gone succeeds — nothing to restart. The classifier is unit-checked for both
// dialects' codes (the real PostgreSQL restart is test/e2e/db-outage.test.ts).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { isStoreUnavailable, openStore } from '../../src/store/index.js'
import { createHarness, type Harness } from './harness.js'

describe('store unavailable → 503', () => {
  it('classifies outage errors of both dialects, and nothing else', () => {
    for (const code of ['SQLITE_BUSY', 'SQLITE_LOCKED', 'SQLITE_FULL', 'SQLITE_IOERR_WRITE', 'SQLITE_READONLY_DBMOVED', 'SQLITE_CANTOPEN', 'ECONNREFUSED', 'ECONNRESET', '57P01', '57P03', '08006', '53100']) {
      expect(isStoreUnavailable(Object.assign(new Error('x'), { code })), code).toBe(true)
    }
    expect(isStoreUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true)
    expect(isStoreUnavailable(new Error('wrapped', { cause: Object.assign(new Error('x'), { code: 'ECONNREFUSED' }) }))).toBe(true)
    for (const code of ['SQLITE_CONSTRAINT_UNIQUE', '23505', '22P02', '42P01', '40001', 'FST_ERR_BAD_URL', undefined]) {
      expect(isStoreUnavailable(Object.assign(new Error('x'), { code })), String(code)).toBe(false)
    }
  })

  describe('SQLite locked by another connection', () => {
    let h: Harness
    let dir: string
    let file: string
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'corral-locked-'))
      file = join(dir, 'corral.db')
      h = await createHarness({ open: () => openStore(`sqlite:${file}`) })
    })
    afterAll(async () => {
      await h.close()
      rmSync(dir, { recursive: true, force: true })
    })

    it('a write waits out busy_timeout, then 503 + Retry-After; succeeds once the lock is released', async () => {
      const { ownerKey } = await h.newOrg()
      const other = new BetterSqlite3(file)
      other.pragma('busy_timeout = 0')
      other.exec('BEGIN EXCLUSIVE')
      try {
        const res = await h.inject('POST', '/v1/api-keys', { token: ownerKey, body: { label: 'locked out', permission_set: 'read_only' } })
        expect(res.status).toBe(503)
        expect(res.body.error).toMatchObject({ code: 'service_unavailable' })
        expect(Number(res.headers['retry-after'])).toBeGreaterThan(0)
      } finally {
        other.exec('ROLLBACK')
        other.close()
      }
      const ok = await h.inject('POST', '/v1/api-keys', { token: ownerKey, body: { label: 'after', permission_set: 'read_only' } })
      expect(ok.status).toBe(201)
    }, 30_000)

    it('a full database (SQLITE_FULL: the file may not grow) is 503 + Retry-After; writes resume once it may grow', async () => {
      const { ownerKey } = await h.newOrg()
      // A real SQLITE_FULL without filling a disk: cap the file at the pages it has now.
      const pages = Number((await sql<{ page_count: number }>`PRAGMA page_count`.execute(h.store.db)).rows[0]!.page_count)
      await sql.raw(`PRAGMA max_page_count = ${pages}`).execute(h.store.db)
      try {
        let status = 0
        // A few writes: the first ones may still fit in free pages.
        for (let i = 0; i < 200 && status !== 503; i++) {
          const res = await h.inject('POST', '/v1/api-keys', { token: ownerKey, body: { label: `fill ${i} ${'x'.repeat(90)}`, permission_set: 'read_only' } })
          status = res.status
          if (status === 503) {
            expect(res.body.error).toMatchObject({ code: 'service_unavailable' })
            expect(Number(res.headers['retry-after'])).toBeGreaterThan(0)
          } else expect(status).toBe(201)
        }
        expect(status).toBe(503)
      } finally {
        await sql.raw('PRAGMA max_page_count = 1073741823').execute(h.store.db)
      }
      const ok = await h.inject('POST', '/v1/api-keys', { token: ownerKey, body: { label: 'room again', permission_set: 'read_only' } })
      expect(ok.status).toBe(201)
    }, 30_000)
  })
})
