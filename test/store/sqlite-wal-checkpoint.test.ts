// The event loop's SQLite connection never runs a checkpoint (docs/storage.md "The main connection
// never checkpoints"): its commits past the WAL's threshold leave the WAL as it is, and the store
// hands the checkpoint to its bulk worker's thread, which copies the WAL into the database file.
// Read from the wal-index header in the -shm file, as the store itself reads it.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'kysely'
import { afterEach, describe, expect, it } from 'vitest'
import { openSqlite, WAL_CHECKPOINT_PAGES } from '../../src/store/dialects/sqlite.js'
import { walBacklog } from '../../src/store/dialects/sqlite-wal.js'

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})

/** About `pages` WAL frames committed by the dialect's own (event loop) connection, a thousand per commit. */
async function grow(d: ReturnType<typeof openSqlite>, pages: number): Promise<void> {
  for (let done = 0; done < pages; done += 1000) {
    await sql`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000) INSERT INTO big SELECT randomblob(3900) FROM n`.execute(d.db)
  }
}

/** A new SQLite file opened by the dialect, with one table `big`; `body` runs on it, the dialect closed after. */
async function onNewDatabase(body: (d: ReturnType<typeof openSqlite>, file: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'corral-wal-'))
  dirs.push(dir)
  const file = join(dir, 'corral.db')
  const d = openSqlite(file)
  try {
    await sql`CREATE TABLE big (x BLOB)`.execute(d.db)
    await body(d, file)
  } finally {
    await d.close()
  }
}

describe('the SQLite event loop connection and the WAL checkpoint', () => {
  it("its commits past the threshold do not checkpoint; the bulk worker's thread does, soon after", async () => {
    await onNewDatabase(async (d, file) => {
      await grow(d, WAL_CHECKPOINT_PAGES + 2_000)
      // A checkpoint on this connection would have copied the WAL back (nothing reads it) and the
      // commits after it restarted the WAL from its start: fewer frames than the threshold.
      expect(await walBacklog(file)).toBeGreaterThanOrEqual(WAL_CHECKPOINT_PAGES)
      let backlog = await walBacklog(file)
      for (let i = 0; i < 150 && backlog !== undefined && backlog >= WAL_CHECKPOINT_PAGES; i++) {
        await new Promise((r) => setTimeout(r, 100))
        backlog = await walBacklog(file)
      }
      expect(backlog).toBe(0)
      // The data is all there, read through the database file now.
      const [row] = (await sql<{ n: number }>`SELECT count(*) AS n FROM big`.execute(d.db)).rows
      expect(row!.n).toBeGreaterThanOrEqual(WAL_CHECKPOINT_PAGES + 2_000)
    })
  }, 30_000)

  it('a small WAL is left alone: no checkpoint is asked for below the threshold', async () => {
    await onNewDatabase(async (d, file) => {
      await grow(d, 2_000)
      const before = await walBacklog(file)
      expect(before).toBeGreaterThan(1_000)
      // Past more than one look at the WAL (every 5 s).
      await new Promise((r) => setTimeout(r, 6_000))
      expect(await walBacklog(file)).toBe(before)
    })
  }, 30_000)
})
