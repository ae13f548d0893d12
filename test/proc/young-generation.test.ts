// The young generation is held at a cap (src/proc/young-generation.ts): in a child process (its own
// heap, nothing else running) an allocation burst that survives scavenges grows the semi-spaces to
// V8's 16 MB without the cap and no further than the cap with it, and again past it once the cap
// is stopped; a worker thread given workerLimits keeps its young generation within them.
import { execFile } from 'node:child_process'
import { resolve } from 'node:path'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { semiSpaceCapMb } from '../../src/proc/index.js'

const run = promisify(execFile)
const MODULE = resolve(import.meta.dirname, '../../src/proc/index.ts')

const BURST = `
  const young = () => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size / 1048576
  async function burst() {
    let keep = []
    let max = 0
    for (let round = 0; round < 300; round++) {
      for (let i = 0; i < 20000; i++) { const o = { a: [i, i], s: 'x' + i }; if (i % 4 === 0) keep.push(o) }
      if (keep.length > 100000) keep = keep.slice(50000)
      max = Math.max(max, young())
      await new Promise((r) => setImmediate(r))
    }
    return max
  }
`

/** The largest new space (MB, both semi-spaces) a burst reached: capped at `cap`, then with the cap stopped. */
async function child(cap: number | undefined): Promise<{ capped: number; uncapped: number }> {
  const script = `
    import { getHeapSpaceStatistics } from 'node:v8'
    import { capYoungGeneration } from ${JSON.stringify(MODULE)}
    ${BURST}
    const stop = capYoungGeneration(${cap ?? ''})
    const capped = await burst()
    await stop()
    const uncapped = await burst()
    process.stdout.write(JSON.stringify({ capped, uncapped }))
  `
  const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { timeout: 120_000 })
  return JSON.parse(stdout) as { capped: number; uncapped: number }
}

describe('capYoungGeneration', () => {
  it('a burst grows the young generation to the cap and no further; stopped, it grows past it', async () => {
    for (const cap of [2, 4]) {
      const r = await child(cap)
      expect(r.capped).toBe(cap * 2)
      expect(r.uncapped).toBeGreaterThan(cap * 2)
    }
  })

  it('0 leaves V8 its own growth', async () => {
    const r = await child(0)
    expect(r.capped).toBeGreaterThan(8)
  })

  it('reads CORRAL_SEMI_SPACE_MB, falling back on anything that is not a whole number of MB', () => {
    expect(semiSpaceCapMb({}, 4)).toBe(4)
    expect(semiSpaceCapMb({ CORRAL_SEMI_SPACE_MB: '8' }, 4)).toBe(8)
    expect(semiSpaceCapMb({ CORRAL_SEMI_SPACE_MB: '0' }, 4)).toBe(0)
    for (const bad of ['', 'lots', '-1', '2.5', '1000']) expect(semiSpaceCapMb({ CORRAL_SEMI_SPACE_MB: bad }, 4)).toBe(4)
  })
})

describe('workerLimits', () => {
  it("bounds a worker thread's young generation to its semi-spaces", async () => {
    const script = `
      import { Worker } from 'node:worker_threads'
      import { workerLimits } from ${JSON.stringify(MODULE)}
      const source = \`
        const { parentPort } = require('node:worker_threads')
        const { getHeapSpaceStatistics } = require('node:v8')
        ${BURST.replace(/`/g, '\\`')}
        burst().then((max) => parentPort.postMessage(max))
      \`
      const sizes = []
      for (const limits of [workerLimits(2), undefined]) {
        const w = new Worker(source, { eval: true, execArgv: [], ...(limits ? { resourceLimits: limits } : {}) })
        sizes.push(await new Promise((r) => w.once('message', r)))
        await w.terminate()
      }
      process.stdout.write(JSON.stringify(sizes))
    `
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { timeout: 120_000 })
    const [limited, unlimited] = JSON.parse(stdout) as [number, number]
    expect(limited).toBeLessThanOrEqual(4)
    expect(unlimited).toBeGreaterThan(4)
  })
})
