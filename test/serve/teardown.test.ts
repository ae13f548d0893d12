// serve stops what it started in reverse; a part that fails to stop is logged and the rest still
// stop; only the audit log and the store fail the shutdown.
import { execFile } from 'node:child_process'
import { resolve } from 'node:path'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { createLogger } from '../../src/server/index.js'
import { Teardown } from '../../src/serve/teardown.js'

describe(Teardown.name, () => {
  const logger = createLogger({ level: 'silent' })

  it('stops in reverse order, once', async () => {
    const order: string[] = []
    const t = new Teardown(logger)
    for (const name of ['store', 'audit', 'proxy', 'api']) t.add(name, async () => void order.push(name))
    await Promise.all([t.run(), t.run()])
    expect(order).toEqual(['api', 'proxy', 'audit', 'store'])
  })

  it('keeps stopping past a failed part; rejects only when a must-succeed part failed', async () => {
    const order: string[] = []
    const soft = new Teardown(logger)
    soft.add('store', async () => void order.push('store'), { mustSucceed: true })
    soft.add('proxy', async () => { throw new Error('stuck') })
    await expect(soft.run()).resolves.toBeUndefined()
    expect(order).toEqual(['store'])

    const hard = new Teardown(logger)
    hard.add('store', async () => void order.push('store again'), { mustSucceed: true })
    hard.add('audit', async () => { throw new Error('flush failed') }, { mustSucceed: true })
    await expect(hard.run()).rejects.toThrow('flush failed')
    expect(order).toEqual(['store', 'store again'])
  })

  it('a step that waits on nothing that can still happen is named, and the exit is 1 (not a silent 13)', async () => {
    // In a child: the event loop must really run dry. The step's promise has no timer, socket or thread behind it.
    const script = `
      import { createLogger } from './src/server/index.js'
      import { Teardown } from './src/serve/teardown.js'
      const t = new Teardown(createLogger({ level: 'info' }))
      t.add('store', async () => {})
      t.add('stuck-part', () => new Promise(() => {}))
      await t.run()
    `
    const root = resolve(import.meta.dirname, '../..')
    const run = promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: root, env: { ...process.env, CORRAL_LOG_FORMAT: 'json' } })
    const err = await run.then(() => undefined, (e: { code?: number; stdout?: string; stderr?: string }) => e)
    expect(err?.code).toBe(1)
    expect(`${err?.stdout}${err?.stderr}`).toContain('shutdown stalled in stuck-part')
  }, 30_000)
})
