// The appender's thread on both dialects, as serve runs it (a `pending` probe on the store's own
// connection): no thread while the queue is empty, a thread for queued rows, let go once its
// rounds add nothing for its idle time, and a new one for the next rows, the tree continuing where
// the last left it. Its exit when idle is not a loss, and a closed host starts none.
import { readdirSync, readFileSync } from 'node:fs'
import { getPriority } from 'node:os'
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

// The writer and the proxy come first: the appender's thread runs nicer than the process
// (Linux keeps a nice value per thread), and only its own thread does.
describe('appender thread priority', () => {
  const niceOfThreads = (): Map<string, number> => {
    const out = new Map<string, number>()
    for (const tid of readdirSync('/proc/self/task')) {
      try {
        const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8')
        out.set(tid, Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]))
      } catch {
        // The thread ended while listed.
      }
    }
    return out
  }

  it.runIf(process.platform === 'linux')('runs its rounds 10 nicer than the process, and leaves every other thread as it was', async () => {
    const d = testDialects()[0]!
    const f = await logFixture(await d.open())
    const before = niceOfThreads()
    const base = getPriority()
    const h = host(f.store, 60_000)
    await f.write(20)
    expect((await h.append()).added).toBe(20)
    const after = niceOfThreads()
    const added = [...after].filter(([tid]) => !before.has(tid))
    expect(added.some(([, nice]) => nice === Math.min(19, base + 10))).toBe(true)
    for (const [tid, nice] of before) if (after.has(tid)) expect(nice).toBe(after.get(tid))
    expect(getPriority()).toBe(base)
    await h.close()
  })
})
