// flushWithin (src/audit/flush-within.ts): the bounded wait that an audit read and a task's end do
// before they answer. It waits for the writer's flush, never longer than its bound, and never fails.
import { describe, expect, it } from 'vitest'
import { flushWithin } from '../../src/audit/index.js'

describe('flushWithin', () => {
  it('waits for the flush to finish', async () => {
    let flushed = false
    await flushWithin({ flush: () => new Promise<void>((r) => setImmediate(() => { flushed = true; r() })) }, 60_000)
    expect(flushed).toBe(true)
  })

  it('gives up at its bound when the flush never finishes (a database outage)', async () => {
    let asked = 0
    await flushWithin({ flush: () => { asked++; return new Promise<void>(() => {}) } }, 20)
    expect(asked).toBe(1)
  })

  it('never rejects: a failed flush leaves the caller to answer on its own', async () => {
    await expect(flushWithin({ flush: () => Promise.reject(new Error('database down')) }, 60_000)).resolves.toBeUndefined()
  })

  it('returns at once for a sink without flush (no journal)', async () => {
    await expect(flushWithin({}, 60_000)).resolves.toBeUndefined()
  })
})
