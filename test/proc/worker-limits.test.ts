// A background worker thread's young generation can be held small (src/proc/worker-limits.ts): in a
// child process, a worker thread given workerLimits(n) grows its new space no further than its two
// semi-spaces under an allocation burst that survives scavenges, while the same burst in a worker
// without limits (the default) grows past it.
import { execFile } from 'node:child_process'
import { resolve } from 'node:path'
import { promisify } from 'node:util'
import { afterEach, describe, expect, it } from 'vitest'
import { workerLimits } from '../../src/proc/index.js'

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

describe('workerLimits', () => {
  it("bounds a worker thread's young generation to its two semi-spaces (as asked; V8's own by default)", async () => {
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
      for (const limits of [workerLimits(2), workerLimits(4), workerLimits()]) {
        const w = new Worker(source, { eval: true, execArgv: [], ...(limits ? { resourceLimits: limits } : {}) })
        sizes.push(await new Promise((r) => w.once('message', r)))
        await w.terminate()
      }
      process.stdout.write(JSON.stringify(sizes))
    `
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { timeout: 120_000 })
    const [two, four, unlimited] = JSON.parse(stdout) as [number, number, number]
    expect(two).toBeLessThanOrEqual(4)
    expect(four).toBeLessThanOrEqual(8)
    expect(unlimited).toBeGreaterThan(8)
  })

  describe('CORRAL_WORKER_SEMI_SPACE_MB', () => {
    const saved = process.env.CORRAL_WORKER_SEMI_SPACE_MB
    afterEach(() => {
      if (saved === undefined) delete process.env.CORRAL_WORKER_SEMI_SPACE_MB
      else process.env.CORRAL_WORKER_SEMI_SPACE_MB = saved
    })

    it("sets the semi-spaces in whole MB; unset or anything else keeps V8's", () => {
      delete process.env.CORRAL_WORKER_SEMI_SPACE_MB
      expect(workerLimits()).toEqual({})
      process.env.CORRAL_WORKER_SEMI_SPACE_MB = '2'
      expect(workerLimits()).toEqual({ maxYoungGenerationSizeMb: 6 })
      process.env.CORRAL_WORKER_SEMI_SPACE_MB = '16'
      expect(workerLimits()).toEqual({ maxYoungGenerationSizeMb: 48 })
      for (const bad of ['', 'lots', '0', '-1', '2.5', '1000']) {
        process.env.CORRAL_WORKER_SEMI_SPACE_MB = bad
        expect(workerLimits()).toEqual({})
      }
    })
  })
})
