// The data dir's lock (src/serve/data-dir-lock.ts) judged against real processes: a holder that
// exited but is not reaped yet (a zombie) is gone and its lock is taken over; a live holder keeps it.
// The binary's side (a second serve refused in one line, a kill -9 taken over) is
// test/e2e/serve-data-dir-lock.test.ts.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { LOCK_FILE, lockDataDir } from '../../src/serve/data-dir-lock.js'
import { procStatField, zombie } from '../helpers/zombie.js'

describe('the data dir lock', () => {
  const dirs: string[] = []
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  })
  const heldBy = (pid: number): string => {
    const dir = mkdtempSync(join(tmpdir(), 'corral-lock-'))
    dirs.push(dir)
    writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid, host: hostname(), started: Number(procStatField(pid, 22)), at: new Date().toISOString() }))
    return dir
  }

  it('a holder that exited but is not yet reaped (a zombie) is gone: its lock is taken over; a live holder keeps it', async () => {
    const z = await zombie()
    try {
      const release = await lockDataDir(heldBy(z.pid))
      await release()
      await expect(lockDataDir(heldBy(z.parentPid))).rejects.toMatchObject({ code: 'CORRAL_DATA_DIR_LOCKED' })
    } finally {
      z.stop()
    }
  })
})
