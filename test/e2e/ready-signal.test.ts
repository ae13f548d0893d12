// "ready" means a stop is handled: `corral serve` and `corral dev` print their ready line only once
// SIGTERM drains, so a supervisor (or a test) that sends SIGTERM the moment it reads the line gets
// the drain and exit 0 — not death by the signal's default, which leaves a stale serve.lock and
// skips the audit flush. Before the fix, 5 of 15 serves stopped this way died by SIGTERM.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { startDev } from '../helpers/dev.js'
import { CORRAL_BIN, hermeticEnv, startServe } from '../helpers/serve.js'

describe('a SIGTERM sent the moment the ready line is read', () => {
  const dirs: string[] = []
  const fresh = () => {
    const d = mkdtempSync(join(tmpdir(), 'corral-ready-'))
    dirs.push(d)
    return d
  }
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  })

  it('serve drains and exits 0 (12 starts, 3 at a time)', async () => {
    const outcomes: Array<{ code: number | null; signal: NodeJS.Signals | null }> = []
    for (let round = 0; round < 4; round++) {
      outcomes.push(...(await Promise.all([0, 1, 2].map(async () => {
        const serve = await startServe({ timeoutMs: 60_000 })
        // startServe resolves in the stdout 'data' handler that saw the line; stop() signals at once.
        const code = await serve.stop()
        return { code, signal: serve.process.signalCode }
      }))))
    }
    expect(outcomes).toEqual(Array.from({ length: 12 }, () => ({ code: 0, signal: null })))
  }, 240_000)

  it("dev: a SIGTERM sent the moment its `corral ready` line (serve's) is read drains and exits 0", async () => {
    // The line used to come before the demo seed and before the handler: the signal's default
    // killed dev mid-seed. Each start stops at the first sight of the line.
    const outcomes = await Promise.all([0, 1].map(async () => {
      const tmp = fresh()
      const child = spawn(process.execPath, [CORRAL_BIN, 'dev', '--data-dir', join(tmp, 'data'), '--port', '0', '--allow-unenforced-limits'], {
        env: { ...hermeticEnv(), NO_COLOR: '1', CORRAL_LOG_LEVEL: 'warn', XDG_CONFIG_HOME: join(tmp, 'config') }, stdio: ['ignore', 'pipe', 'pipe'],
      })
      let out = ''
      child.stderr!.on('data', (c) => (out += String(c)))
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.once('exit', (code, signal) => r({ code, signal })))
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
      child.stdout!.on('data', (c) => {
        out += String(c)
        if (/^corral ready: /m.test(out) && child.signalCode === null) child.kill('SIGTERM')
      })
      const r = await exited
      clearTimeout(timer)
      return { ...r, ready: /^corral ready: /m.test(out) }
    }))
    expect(outcomes).toEqual([0, 1].map(() => ({ code: 0, signal: null, ready: true })))
  }, 180_000)

  it('dev drains and exits 0 (3 at once)', async () => {
    const codes = await Promise.all([0, 1, 2].map(async () => {
      const tmp = fresh()
      const dev = await startDev(join(tmp, 'data'), { XDG_CONFIG_HOME: join(tmp, 'config') })
      const code = await dev.stop()
      return { code, signal: dev.child.signalCode }
    }))
    expect(codes).toEqual([0, 1, 2].map(() => ({ code: 0, signal: null })))
  }, 180_000)
})
