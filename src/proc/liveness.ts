// Whether a process another one left a mark for (a journal's LOCK, the data dir's lock, dev.lock,
// a sandbox's cgroup) is still that process. kill(pid, 0) alone is not enough: it succeeds on a
// process that has exited but is not yet reaped (a zombie: a proxy worker whose primary was killed
// -9 waits seconds for init), and on an unrelated process that reused the pid. /proc tells both
// apart on Linux: the state letter, and the start time in clock ticks since boot.
import { readFileSync } from 'node:fs'

/** State letter and start time of `pid` from /proc/<pid>/stat; undefined off Linux or when it is gone. */
export function procStat(pid: number): { state: string; start: number } | undefined {
  let text: string
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return undefined
  }
  // "pid (comm) state ppid …": comm may hold spaces and parentheses, so split after the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ')
  // Field 3 is the state, field 22 the start time.
  if (fields.length < 20) return undefined
  const start = Number(fields[19])
  return { state: fields[0], start: Number.isFinite(start) ? start : NaN }
}

/** This process's start time in clock ticks since boot, to record beside its pid; undefined off Linux. */
export function ownStartTicks(): number | undefined {
  const start = procStat(process.pid)?.start
  return start !== undefined && Number.isFinite(start) ? start : undefined
}

/**
 * True when `pid` will never act again as the process that left the mark: there is no such
 * process, it is a zombie, or (with `start`, its recorded start time) another process now has the
 * pid. A process we may not signal (EPERM) exists, so it is not gone.
 */
export function processGone(pid: number, start?: number): boolean {
  try {
    process.kill(pid, 0)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return true
  }
  const now = procStat(pid)
  if (!now) return false // off Linux (or gone this instant): kill() said it exists
  if (now.state === 'Z' || now.state === 'X') return true
  return start !== undefined && Number.isFinite(now.start) && now.start !== start
}
