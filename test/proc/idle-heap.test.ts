// An idle process gives its young generation back (src/proc/idle-heap.ts): in a child process
// (its own heap, nothing else running) whose young generation an allocation burst grew to its
// maximum, the check shrinks it once the event loop is idle, and a stopped check leaves it alone.
import { execFile } from 'node:child_process'
import { resolve } from 'node:path'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'

const run = promisify(execFile)
const MODULE = resolve(import.meta.dirname, '../../src/proc/index.ts')

/** The child's young generation (MB) after its burst and after `waitMs` idle, with the check started (and stopped at once when `stop`). */
async function child(stop: boolean, waitMs: number): Promise<{ grown: number; after: number; gcFlagLeaked: boolean }> {
  const script = `
    import { getHeapSpaceStatistics } from 'node:v8'
    import { trimHeapWhenIdle } from ${JSON.stringify(MODULE)}
    const young = () => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size / 1048576
    let keep = []
    const end = Date.now() + 1500
    while (Date.now() < end) { keep.push({ a: [1, 2, 3], s: 'x'.repeat(64) }); if (keep.length > 200000) keep = [] }
    keep = undefined
    const grown = young()
    const stopTrim = trimHeapWhenIdle(150)
    if (${stop}) await stopTrim()
    await new Promise((r) => setTimeout(r, ${waitMs}))
    process.stdout.write(JSON.stringify({ grown, after: young(), gcFlagLeaked: typeof globalThis.gc === 'function' }))
  `
  const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { timeout: 60_000 })
  return JSON.parse(stdout) as { grown: number; after: number; gcFlagLeaked: boolean }
}

describe('trimHeapWhenIdle', () => {
  it('shrinks a young generation grown by a burst once the process is idle', async () => {
    const r = await child(false, 3_000)
    expect(r.grown).toBeGreaterThan(8)
    expect(r.after).toBeLessThanOrEqual(4)
    expect(r.gcFlagLeaked).toBe(false)
  })

  it('stopped, it runs no collection: the young generation stays as the burst left it', async () => {
    const r = await child(true, 1_000)
    expect(r.grown).toBeGreaterThan(8)
    expect(r.after).toBe(r.grown)
  })
})
