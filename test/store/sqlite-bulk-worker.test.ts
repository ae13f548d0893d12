// SQLite bulk inserts (the audit log's group commit) run on a worker thread, off the event loop.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { afterAll, describe, expect, it } from 'vitest'
import { createAuditWriter, stamp } from '../../src/audit/index.js'
import { openStore } from '../../src/store/index.js'
import { mutation, orgId } from '../audit/fixtures.js'

describe('SQLite bulk insert worker', () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-bulk-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('commits a batch while the main thread is blocked (the insert does not run on it)', async () => {
    const file = join(dir, 'corral.db')
    const store = await openStore(`sqlite:${file}`)
    const org = orgId()
    await store.audit.insertBatchReturningIds([stamp(mutation(org))]) // spawns the worker
    // The call hands the batch over synchronously; then this thread blocks and watches the file
    // through another connection: the row can only appear if another thread inserts it (the
    // in-thread path needs the event loop to acquire its connection). Bounded: at most 10 s.
    const pending = store.audit.insertBatchReturningIds([stamp(mutation(org))])
    const probe = new BetterSqlite3(file, { readonly: true })
    const n = () => (probe.prepare('SELECT count(*) AS n FROM audit_events WHERE org_id = ?').get(org) as { n: number }).n
    const until = Date.now() + 10_000
    while (n() < 2 && Date.now() < until) {
      /* busy: the event loop does not turn */
    }
    expect(n()).toBe(2)
    probe.close()
    expect(await pending).toHaveLength(1)
    await store.close()
  })

  it('a closed store refuses instead of hanging, and a fresh store on the file works', async () => {
    const file = join(dir, 'second.db')
    const store = await openStore(`sqlite:${file}`)
    await store.close()
    await expect(store.audit.insertBatchReturningIds([])).resolves.toEqual([])
    const again = await openStore(`sqlite:${file}`)
    const writer = createAuditWriter(again)
    const e = await writer.emit(mutation('org_x'))
    expect(await again.audit.getById('org_x', e.id)).toBeDefined()
    await writer.close()
    await again.close()
  })
})
