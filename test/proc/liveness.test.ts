// src/proc: whether a pid recorded in a lock or a journal is still the process that wrote it.
import { spawn } from 'node:child_process'
import { afterAll, describe, expect, it } from 'vitest'
import { ownStartTicks, procStat, processGone } from '../../src/proc/index.js'
import { zombie, type Zombie } from '../helpers/zombie.js'

describe('processGone', () => {
  const zombies: Zombie[] = []
  afterAll(() => {
    for (const z of zombies) z.stop()
  })

  it('this process, with its own start time, is not gone', () => {
    expect(ownStartTicks()).toBeGreaterThan(0)
    expect(processGone(process.pid)).toBe(false)
    expect(processGone(process.pid, ownStartTicks())).toBe(false)
  })

  it('a process that has exited and been reaped is gone', async () => {
    const child = spawn('true')
    const pid = child.pid!
    await new Promise((r) => child.once('exit', r))
    expect(processGone(pid)).toBe(true)
  })

  it('a zombie (exited, not reaped: kill(pid, 0) still succeeds) is gone', async () => {
    const z = await zombie()
    zombies.push(z)
    expect(() => process.kill(z.pid, 0)).not.toThrow()
    expect(procStat(z.pid)?.state).toBe('Z')
    expect(processGone(z.pid)).toBe(true)
  })

  it('a live pid whose start time differs from the recorded one is another process (a reused pid)', async () => {
    const z = await zombie()
    zombies.push(z)
    const start = procStat(z.parentPid)!.start
    expect(processGone(z.parentPid, start)).toBe(false)
    expect(processGone(z.parentPid, start - 1)).toBe(true)
    // No recorded start time: only gone or zombie count.
    expect(processGone(z.parentPid)).toBe(false)
  })

  it('pid 1 (not ours to signal, EPERM when unprivileged) is not gone', () => {
    expect(processGone(1)).toBe(false)
  })
})
