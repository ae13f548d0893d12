// A process that has exited but is not reaped (a zombie), as a `corral proxy` worker is between its
// exit and init reaping it once its primary was killed -9 (seconds on this machine): `sleep 0`,
// whose parent exec'd into a `sleep` that never waits for it. kill(pid, 0) succeeds on it.
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'

export interface Zombie {
  pid: number
  /** The zombie's parent: alive until stop(). */
  parentPid: number
  /** Kills the parent (init then reaps both). */
  stop(): void
}

/** Field `n` (1-based, as in proc(5)) of /proc/<pid>/stat. */
export function procStatField(pid: number, n: number): string | undefined {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[n - 3]
}

export async function zombie(): Promise<Zombie> {
  const parent = spawn('sh', ['-c', 'sleep 0 & echo $!; exec sleep 60'], { stdio: ['ignore', 'pipe', 'ignore'] })
  const stop = () => void parent.kill('SIGKILL')
  const pid = await new Promise<number>((done) => parent.stdout!.once('data', (c: Buffer) => done(Number(String(c).trim()))))
  for (let i = 0; i < 100 && procStatField(pid, 3) !== 'Z'; i++) await new Promise((r) => setTimeout(r, 20))
  if (procStatField(pid, 3) !== 'Z') {
    stop()
    throw new Error(`process ${pid} did not become a zombie`)
  }
  return { pid, parentPid: parent.pid!, stop }
}
