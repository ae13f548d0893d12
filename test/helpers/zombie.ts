// A process that has exited but is not reaped (a zombie), as a `corral proxy` worker is between its
// exit and init reaping it once its primary was killed -9 (seconds on this machine): a child perl
// forks and never waits for. kill(pid, 0) succeeds on it. (A shell's `sleep 0 &` before `exec
// sleep` raced: when the child ended before the exec, the shell reaped it and it never was a zombie.)
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'

export interface Zombie {
  pid: number
  /** The zombie's parent: alive until stop(). */
  parentPid: number
  /** Kills the parent (init then reaps both). */
  stop(): void
}

/** Field `n` (1-based, as in proc(5)) of /proc/<pid>/stat; undefined once the process is gone. */
export function procStatField(pid: number, n: number): string | undefined {
  let stat: string
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return undefined
  }
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[n - 3]
}

export async function zombie(): Promise<Zombie> {
  const parent = spawn('perl', ['-e', '$| = 1; my $p = fork(); exit 0 if defined $p && $p == 0; print "$p\\n"; sleep 60'], { stdio: ['ignore', 'pipe', 'ignore'] })
  const stop = () => void parent.kill('SIGKILL')
  const pid = await new Promise<number>((done) => parent.stdout!.once('data', (c: Buffer) => done(Number(String(c).trim()))))
  for (let i = 0; i < 250 && procStatField(pid, 3) !== 'Z'; i++) await new Promise((r) => setTimeout(r, 20))
  if (procStatField(pid, 3) !== 'Z') {
    stop()
    throw new Error(`process ${pid} did not become a zombie`)
  }
  return { pid, parentPid: parent.pid!, stop }
}
