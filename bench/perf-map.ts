// The JIT symbol maps V8 writes for perf (--perf-basic-prof: /tmp/perf-<pid>.map, one
// "<start hex> <size hex> <name>" line per code object, appended and never retracted). A range
// freed by GC and reused by later code carries two names, and perf may pick the older one
// (start-up code such as the module loader named in a steady-state window).
import { copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs'

/** The map's lines keeping, where ranges overlap, only the latest (in the original order). */
export function latestEntries(lines: readonly string[]): string[] {
  const kept: string[] = []
  const taken: [number, number][] = [] // sorted by start, disjoint
  const firstEndingAfter = (a: number): number => {
    let lo = 0
    let hi = taken.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (taken[mid]![1] <= a) lo = mid + 1
      else hi = mid
    }
    return lo
  }
  for (let i = lines.length - 1; i >= 0; i--) {
    const [a, n] = lines[i]!.split(' ', 2)
    const start = parseInt(a!, 16)
    const end = start + Math.max(1, parseInt(n!, 16))
    if (!Number.isFinite(start) || !Number.isFinite(end)) continue
    const at = firstEndingAfter(start)
    if (at < taken.length && taken[at]![0] < end) continue
    kept.push(lines[i]!)
    taken.splice(at, 0, [start, end])
  }
  return kept.reverse()
}

/** Rewrites /tmp/perf-<pid>.map to its latest entries, the original kept beside it as .orig (read from there on a second pass). */
export function rewriteMap(pid: string): void {
  const map = `/tmp/perf-${pid}.map`
  if (!existsSync(map)) return
  if (!existsSync(`${map}.orig`)) copyFileSync(map, `${map}.orig`)
  writeFileSync(map, latestEntries(readFileSync(`${map}.orig`, 'utf8').split('\n').filter(Boolean)).join('\n') + '\n')
}
