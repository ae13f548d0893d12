// A write that meets the write lock another connection holds waits for it without holding the
// event loop: timers run while it waits, it completes once the lock is released, and on SQLite it
// still fails with SQLITE_BUSY once the store's lock wait has passed. Both a transaction (a budget
// ledger's read-modify-write) and a single statement outside one; the lock holder is a sibling
// store (another connection) holding an open write transaction.
import { describe, expect, it } from 'vitest'
import { budgetLedgers, type Store } from '../../src/store/index.js'
import { openSibling, testDialects } from '../helpers/dialects.js'

const KEY = { key: 'ws_lock|ws|c|c', orgId: 'org_lock', workspaceId: 'ws_lock' }

/** Another connection's write transaction on the ledger row, held until `release()`. */
async function holdWriteLock(other: Store): Promise<{ release(): void; done: Promise<void> }> {
  let release!: () => void
  const released = new Promise<void>((r) => (release = r))
  let locked!: () => void
  const isLocked = new Promise<void>((r) => (locked = r))
  const done = other.transaction(async (tx) => {
    const db = tx.db as unknown as import('kysely').Kysely<{ budget_ledgers: { key: string; used: number } }>
    await db.updateTable('budget_ledgers').set({ used: 1 }).where('key', '=', KEY.key).execute()
    locked()
    await released
  })
  await isLocked
  return { release, done }
}

/** Whether `p` is still pending after a timer of this event loop fired (then: the loop ran). */
async function pendingAfterATimer(p: Promise<unknown>): Promise<boolean> {
  let settled = false
  p.then(() => (settled = true), () => (settled = true))
  await new Promise((r) => setTimeout(r, 0))
  return !settled
}

for (const d of testDialects()) {
  describe(`a write meeting another connection's write lock [${d.name}]`, () => {
    it('a transaction waits without holding the event loop and completes once the lock is released', async () => {
      const store = await d.open()
      const other = await openSibling(store)
      await budgetLedgers(store).adjust([{ k: KEY, delta: 0 }])
      const lock = await holdWriteLock(other)
      const write = budgetLedgers(store).acquire(KEY, 100, 5)
      expect(await pendingAfterATimer(write)).toBe(true)
      lock.release()
      await lock.done
      expect(await write).toMatchObject({ granted: 5, snapshot: { used: 6 } })
    })

    it('a single statement outside a transaction waits the same way', async () => {
      const store = await d.open()
      const other = await openSibling(store)
      await budgetLedgers(store).adjust([{ k: KEY, delta: 0 }])
      const lock = await holdWriteLock(other)
      const db = store.db as unknown as import('kysely').Kysely<{ budget_ledgers: { key: string; used: number } }>
      const write = db.updateTable('budget_ledgers').set({ used: 40 }).where('key', '=', KEY.key).execute()
      expect(await pendingAfterATimer(write)).toBe(true)
      lock.release()
      await lock.done
      await write
      expect((await budgetLedgers(store).read(KEY.key))?.used).toBe(40)
    })

    if (d.name === 'sqlite') {
      it('still fails with SQLITE_BUSY once the lock wait has passed, and the store works after', async () => {
        const store = await d.open()
        const other = await openSibling(store)
        await budgetLedgers(store).adjust([{ k: KEY, delta: 0 }])
        const lock = await holdWriteLock(other)
        const err = await budgetLedgers(store).acquire(KEY, 100, 5).catch((e: unknown) => e)
        expect((err as { code?: string }).code).toBe('SQLITE_BUSY')
        lock.release()
        await lock.done
        expect((await budgetLedgers(store).acquire(KEY, 100, 5)).granted).toBe(5)
      }, 20_000)
    }
  })
}
