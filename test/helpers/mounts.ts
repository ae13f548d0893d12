// What a serve killed with -9 leaves mounted in its data dir (workspaces' /data images, docs/runtime.md
// "Disk quota"): taken down before the directory is removed, or the removal meets a busy mount point.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { resolve, sep } from 'node:path'

/** Detaches every mount at or below `dir` (deepest first); nothing when there is none. */
export function unmountUnder(dir: string): void {
  const root = resolve(dir)
  let info: string
  try {
    info = readFileSync('/proc/self/mountinfo', 'utf8')
  } catch {
    return
  }
  const points = info.split('\n').map((line) => line.split(' ')[4]?.replace(/\\(\d{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))))
    .filter((p): p is string => p !== undefined && (p === root || p.startsWith(`${root}${sep}`)))
  for (const point of points.sort((a, b) => b.length - a.length)) {
    try {
      execFileSync('umount', ['-l', point], { stdio: 'ignore' })
    } catch {
      // Already gone, or not ours to take down: the removal that follows says so.
    }
  }
}
