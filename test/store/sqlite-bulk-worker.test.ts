// SQLite bulk inserts (the audit log's group commit) run on a worker thread, off the event loop.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { Worker } from 'node:worker_threads'
import BetterSqlite3 from 'better-sqlite3'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { createAuditWriter, stamp } from '../../src/audit/index.js'
import { openStore } from '../../src/store/index.js'
import { SqliteBulkWorker } from '../../src/store/dialects/sqlite-bulk-worker.js'
import { decision, mutation, orgId } from '../audit/fixtures.js'

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

  it('a batch of encoded lines crosses to the worker as those lines, never as one text joined from them, and every row is stored', async () => {
    // A batch's joined text (hundreds of KB at a few thousand rows per second) was a large object
    // on both threads' heaps per batch: mapped, faulted in page by page and unmapped again.
    const store = await openStore(`sqlite:${join(dir, 'lines.db')}`)
    const org = orgId()
    const events = Array.from({ length: 200 }, (_, i) => stamp(i % 2 ? decision(org, { latency_ms: i }) : mutation(org)))
    const lines = events.map((e) => JSON.stringify({ ts: Date.parse(e.timestamp), ...e }))
    const longest = Math.max(...lines.map((l) => l.length))
    const post = vi.spyOn(Worker.prototype, 'postMessage')
    try {
      expect((await store.audit.insertEncodedReturningIds(lines)).sort()).toEqual(events.map((e) => e.id).sort())
      const sent = post.mock.calls.map(([m]) => m as Record<string, unknown>).filter((m) => m.text !== undefined)
      expect(sent).toHaveLength(1)
      expect(sent[0]!.records).toEqual(lines)
      for (const v of Object.values(sent[0]!)) if (typeof v === 'string') expect(v.length).toBeLessThanOrEqual(Math.max(longest, 4096))
    } finally {
      post.mockRestore()
    }
    const n = await store.db.selectFrom('audit_events').select((eb) => eb.fn.countAll().as('n')).where('org_id', '=', org).executeTakeFirstOrThrow()
    expect(Number(n.n)).toBe(200)
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

describe('SQLite bulk insert worker when idle', () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-bulk-idle-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))
  const table = (file: string): BetterSqlite3.Database => {
    const db = new BetterSqlite3(file)
    db.pragma('journal_mode = WAL')
    db.exec('CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, v TEXT)')
    return db
  }
  const insert = { text: 'INSERT INTO t (id, v) VALUES (?, ?) ON CONFLICT DO NOTHING', strict: 'INSERT INTO t (id, v) VALUES (?, ?) ON CONFLICT (id) DO NOTHING' }

  it('exits after its idle time (its heap and connection let go) and the next batch starts another', async () => {
    const file = join(dir, 'idle.db')
    const db = table(file)
    const worker = new SqliteBulkWorker(file, { idleExitMs: 50 })
    expect(worker.running).toBe(false)
    expect(await worker.run(insert, [['a', '1'], ['b', '2']], 0)).toEqual(['a', 'b'])
    await vi.waitFor(() => expect(worker.running).toBe(false), { timeout: 10_000 })
    // Another batch after the exit: a new worker, same file, nothing lost or repeated.
    expect(await worker.run(insert, [['b', 'dup'], ['c', '3']], 0)).toEqual(['c'])
    expect(worker.running).toBe(true)
    await worker.close()
    expect(db.prepare('SELECT id, v FROM t ORDER BY id').all()).toEqual([{ id: 'a', v: '1' }, { id: 'b', v: '2' }, { id: 'c', v: '3' }])
    db.close()
  })

  it('a store closed after its worker went idle refuses later batches and keeps every row', async () => {
    const file = join(dir, 'busy.db')
    const db = table(file)
    const worker = new SqliteBulkWorker(file, { idleExitMs: 50 })
    for (let i = 0; i < 20; i++) await worker.run(insert, [[`k${i}`, String(i)]], 0)
    await vi.waitFor(() => expect(worker.running).toBe(false), { timeout: 10_000 })
    await worker.close()
    await expect(worker.run(insert, [['late', 'x']], 0)).rejects.toMatchObject({ code: 'SQLITE_MISUSE_CLOSED' })
    expect((db.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n).toBe(20)
    db.close()
  })
})
