// The appender's thread on both dialects, as serve runs it (a `pending` probe on the store's own
// connection): no thread while the queue is empty, a thread for queued rows, let go once its
// rounds add nothing for its idle time, and a new one for the next rows, the tree continuing where
// the last left it. Its exit when idle is not a loss, and a closed host starts none.
import { describe, expect, it, vi } from 'vitest'
import { AppendHost } from '../../../src/audit/merkle/append-host.js'
import type { Store } from '../../../src/store/index.js'
import { storeTarget, testDialects } from '../../helpers/dialects.js'
import { errors, logFixture } from './log-harness.js'

const host = (store: Store, idleExitMs: number): AppendHost =>
  new AppendHost({ ...storeTarget(store)!, batch: 64 }, { pending: async () => (await store.auditLog.pending(1)).length > 0, idleExitMs })

for (const d of testDialects()) {
  describe(`appender thread when idle [${d.name}]`, () => {
    it('starts no thread for an empty queue, appends on one, lets it go when idle, and the next rows start another', async () => {
      const f = await logFixture(await d.open())
      const h = host(f.store, 200)
      expect((await h.append()).added).toBe(0)
      expect(h.running).toBe(false)

      await f.write(150, 'a')
      expect((await h.append()).added).toBe(150)
      expect(h.running).toBe(true)
      // Rounds that find nothing do not keep it up.
      expect((await h.append()).added).toBe(0)
      await vi.waitFor(() => expect(h.running).toBe(false), { timeout: 15_000, interval: 50 })
      expect((await h.append()).added).toBe(0)
      expect(h.running).toBe(false)

      await f.write(70, 'b')
      expect((await h.append()).added).toBe(70)
      expect(h.running).toBe(true)
      await h.close()
      expect(h.running).toBe(false)

      const leaves = await f.store.auditLog.leaves(f.org, 0, 1e9)
      expect(leaves.map((l) => l.idx)).toEqual(Array.from({ length: 220 }, (_, i) => i))
      expect(await f.store.auditLog.pending(10)).toEqual([])
      await f.log.checkpoint()
      expect(errors(await f.verify())).toEqual([])
    })

    it('a host closed after its thread went idle starts none, and rows queued later wait for the next appender', async () => {
      const f = await logFixture(await d.open())
      const h = host(f.store, 100)
      await f.write(10)
      expect((await h.append()).added).toBe(10)
      await vi.waitFor(() => expect(h.running).toBe(false), { timeout: 15_000, interval: 50 })
      await h.close()
      await f.write(5)
      expect((await h.append()).added).toBe(0)
      expect(h.running).toBe(false)
      expect((await f.store.auditLog.pending(10)).length).toBe(5)
      await f.log.checkpoint()
      expect((await f.ids()).length).toBe(15)
      expect(errors(await f.verify())).toEqual([])
    })
  })
}
