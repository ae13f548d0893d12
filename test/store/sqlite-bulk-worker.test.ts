// SQLite bulk inserts (the audit log's group commit) run on a worker thread, off the event loop.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
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

  it('close() with a batch in flight keeps the process alive until the worker is gone (no exit 13 in the middle of a shutdown)', () => {
    // The batch's answer used to unref the worker that close() had just referenced: a process with
    // nothing else left (serve at the end of its teardown, after the audit drain gave up on a batch)
    // ran dry before the worker's exit and Node ended it with 13, an unsettled top-level await.
    const root = resolve(import.meta.dirname, '../..')
    const r = spawnSync(process.execPath, ['--import', 'tsx', join(root, 'test/store/sqlite-bulk-close-child.ts'), join(dir, 'close.db'), '50'], { cwd: root, encoding: 'utf8', timeout: 30_000 })
    expect({ status: r.status, stdout: r.stdout, stderr: r.stderr }).toEqual({ status: 0, stdout: 'closed 50\n', stderr: '' })
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
