// A tick's catch-up runs in slices (docs/audit.md "Catch-up in slices"), on both dialects, on the
// caller's thread and on the appender's own thread as serve runs it: within the lag's bounds the
// rounds take at most a slice of the queue with a pause after each as long as the slice ran, and
// every row is still appended in commit order; past a bound the rounds are full batches back to
// back, and a writer that never stops being busy still gets the log caught up. What a slice costs in time is the benchmark's (bench:proxy), not a test's.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { AppendPacer, type PaceOptions } from '../../../src/audit/merkle/pace.js'
import type { Store } from '../../../src/store/index.js'
import { testDialects } from '../../helpers/dialects.js'
import { APPENDER_MODES, errors, logFixture, logOn } from './log-harness.js'

/** The queue entries each round of `store` took, in order, empty reads left out (the caller's thread only). */
function roundSizes(store: Store): number[] {
  const sizes: number[] = []
  const real = store.auditLog.pendingBatch.bind(store.auditLog)
  vi.spyOn(store.auditLog, 'pendingBatch').mockImplementation(async (limit, visit) => {
    let n = 0
    await real(limit, { begin: (columns) => ((n = 0), visit.begin(columns)), entry: (q) => (n++, visit.entry(q)) })
    if (n > 0) sizes.push(n)
  })
  return sizes
}

/** The pauses the pacer gave after each slice (ms), in order (the caller's thread only). */
function pausesOf(): number[] {
  const out: number[] = []
  const real = AppendPacer.prototype.pauseAfter
  vi.spyOn(AppendPacer.prototype, 'pauseAfter').mockImplementation(function (this: AppendPacer, ms: number) {
    const p = real.call(this, ms)
    out.push(p)
    return p
  })
  return out
}

afterEach(() => vi.restoreAllMocks())

for (const d of testDialects()) {
  for (const mode of APPENDER_MODES) {
    describe(`catch-up in slices [${d.name}, ${mode.name}]`, () => {
      const log = (store: Store, pace: PaceOptions, o: { busy?: () => boolean; batch?: number } = {}) =>
        logOn(mode, store, { pace, ...(o.busy ? { writerBusy: o.busy } : {}), ...(o.batch ? { batch: o.batch } : {}) })
      /** `rows` written, then one append of them by a log paced by `pace` (`paced`: as a tick; else on demand); the rounds' sizes and the pauses (the caller's thread only). */
      const catchUp = async (pace: PaceOptions, o: { batch?: number }, rows: number, paced: boolean) => {
        const f = await logFixture(await d.open())
        const l = log(f.store, pace, o)
        await f.write(rows)
        const sizes = roundSizes(f.store)
        const paused = pausesOf()
        const added = await l.append(paced ? { paced: true } : {})
        return { f, l, sizes, paused, added }
      }
      /** The log as appended checkpoints and verifies clean. */
      const expectVerified = async (f: Awaited<ReturnType<typeof logFixture>>) => {
        await f.log.checkpoint()
        expect(errors(await f.verify())).toEqual([])
      }

      it('within the bounds a tick appends slice by slice, pausing between slices, and catches up whole in commit order', async () => {
        const { f, l, sizes, paused, added } = await catchUp({ sliceRows: 25 }, {}, 130, true)
        try {
          expect(added).toBe(130)
          if (!mode.thread) {
            expect(sizes).toEqual([25, 25, 25, 25, 25, 5])
            // A pause after each full slice, as long as the slice ran (half a core); the short last one ended the catch-up.
            expect(paused).toHaveLength(5)
            for (const ms of paused) expect(ms).toBeGreaterThan(0)
          }
          expect(await f.store.auditLog.pending(10)).toEqual([])
          const paths = (await f.store.auditLog.leafRows(f.org, 0, 1_000)).map((r) => String(r.path))
          expect(paths).toEqual(Array.from({ length: 130 }, (_, i) => `/w/${i}`))
          await expectVerified(f)
        } finally {
          await l.stop()
        }
      })

      it('past the bound in rows it appends full batches back to back, then slices', async () => {
        const { f, l, sizes, paused, added } = await catchUp({ sliceRows: 10, maxLagRows: 50, maxLagMs: 3_600_000 }, { batch: 40 }, 130, true)
        try {
          expect(added).toBe(130)
          if (!mode.thread) {
            expect(sizes).toEqual([40, 40, 40, 10])
            // No pause between the batches past the bound; one after the slice within it.
            expect(paused).toHaveLength(1)
          }
          await expectVerified(f)
        } finally {
          await l.stop()
        }
      })

      it('an on-demand append is never sliced', async () => {
        const { l, sizes, paused, added } = await catchUp({ sliceRows: 10 }, {}, 60, false)
        try {
          expect(added).toBe(60)
          if (!mode.thread) {
            expect(sizes).toEqual([60])
            expect(paused).toEqual([])
          }
        } finally {
          await l.stop()
        }
      })

      it('a writer that is never idle still gets the log caught up once the lag reaches its bound in seconds', async () => {
        const f = await logFixture(await d.open())
        const l = log(f.store, { sliceRows: 10, maxLagRows: 1_000_000, maxLagMs: 300 }, { busy: () => true })
        try {
          await f.write(60)
          let added = await l.append({ paced: true })
          await vi.waitFor(async () => {
            added += await l.append({ paced: true })
            expect(added).toBe(60)
          }, { timeout: 15_000, interval: 100 })
          expect(await f.store.auditLog.pending(10)).toEqual([])
          await expectVerified(f)
        } finally {
          await l.stop()
        }
      })
    })
  }
}
