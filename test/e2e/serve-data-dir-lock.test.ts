// One serve per data dir, through the binary (docs/reliability.md "One serve per data dir"): a
// second `corral serve` on a held data dir refuses in one line naming the holder's pid and exits 1,
// the first keeps serving; two started at the same moment leave exactly one running; after a
// kill -9 the stale lock is taken over, and so is a lock naming a live pid that is not the process
// that wrote it (a pid reused after a crash) or an unreadable one.
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { startServe, runCorral, type RunningServe } from '../helpers/serve.js'

const LINE = /^(?:Error: )?the data dir .+ is in use by another corral serve or dev \(pid (\d+), since [^)]+\): stop it first, or pass another --data-dir$/

describe('serve: one process per data dir', () => {
  const dirs: string[] = []
  const running: RunningServe[] = []
  const freshDir = () => {
    const d = mkdtempSync(join(tmpdir(), 'corral-lock-'))
    dirs.push(d)
    return d
  }
  afterAll(async () => {
    await Promise.all(running.map((r) => r.stop()))
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  })

  it('a second serve on a held data dir says which process holds it, in one line, and exits 1; the first keeps serving', async () => {
    const first = await startServe({ dataDir: freshDir(), timeoutMs: 60_000 })
    running.push(first)
    const second = await runCorral(['serve', '--port', '0', '--data-dir', first.dataDir])
    expect(second.code).toBe(1)
    const lines = second.stderr.trim().split('\n')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(LINE)
    expect(Number(LINE.exec(lines[0]!)![1])).toBe(first.process.pid)
    expect((await fetch(`${first.url}/healthz`)).status).toBe(200)
    // A clean stop lets go of the lock: the next start on the dir comes up.
    expect(await first.stop({ keepDataDir: true })).toBe(0)
    expect(existsSync(join(first.dataDir, 'serve.lock'))).toBe(false)
    const again = await startServe({ dataDir: first.dataDir, timeoutMs: 60_000 })
    running.push(again)
    expect((await fetch(`${again.url}/healthz`)).status).toBe(200)
  }, 150_000)

  it('two serves started together on one data dir: exactly one runs, the other refuses with the line', async () => {
    const dir = freshDir()
    const both = await Promise.allSettled([startServe({ dataDir: dir, timeoutMs: 60_000 }), startServe({ dataDir: dir, timeoutMs: 60_000 })])
    const up = both.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []))
    running.push(...up)
    expect(up).toHaveLength(1)
    const refused = both.find((r): r is PromiseRejectedResult => r.status === 'rejected')!
    expect(String(refused.reason)).toMatch(/exited with 1 before it was ready/)
    expect(String(refused.reason)).toMatch(/is in use by another corral serve or dev \(pid \d+/)
  }, 150_000)

  it('takes over a stale lock: after kill -9, a reused pid, an unreadable lock file', async () => {
    const dir = freshDir()
    const killed = await startServe({ dataDir: dir, timeoutMs: 60_000 })
    killed.process.kill('SIGKILL')
    await new Promise((r) => killed.process.once('exit', r))
    expect(JSON.parse(readFileSync(join(dir, 'serve.lock'), 'utf8')).pid).toBe(killed.process.pid)
    const after = await startServe({ dataDir: dir, timeoutMs: 60_000 })
    expect(JSON.parse(readFileSync(join(dir, 'serve.lock'), 'utf8')).pid).toBe(after.process.pid)
    expect(await after.stop({ keepDataDir: true })).toBe(0)

    // This test runner's pid is alive, but it did not start at tick 1: not the lock's writer.
    writeFileSync(join(dir, 'serve.lock'), JSON.stringify({ pid: process.pid, host: hostname(), started: 1, at: '2026-01-01T00:00:00.000Z' }))
    const reused = await startServe({ dataDir: dir, timeoutMs: 60_000 })
    expect(await reused.stop({ keepDataDir: true })).toBe(0)

    writeFileSync(join(dir, 'serve.lock'), '{"pid":')
    const garbled = await startServe({ dataDir: dir, timeoutMs: 60_000 })
    running.push(garbled)
    expect((await fetch(`${garbled.url}/healthz`)).status).toBe(200)
  }, 240_000)
})
