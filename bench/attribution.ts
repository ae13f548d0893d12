// What bench/profile-summary.ts (V8 .cpuprofile) and bench/perf-summary.ts (`perf record`) share:
// their flags, and the one attribution loop — each sample's weight summed under the owner (or
// owners) it is given to, then the largest first.

/** `--name` switches and `--name value` options taken out of `args`, in place; the rest are positional. */
export function cliArgs(args: string[]): { flag(name: string): boolean; value(name: string, fallback: string): string } {
  return {
    flag(name) {
      const i = args.indexOf(name)
      if (i >= 0) args.splice(i, 1)
      return i >= 0
    },
    value(name, fallback) {
      const i = args.indexOf(name)
      if (i < 0) return fallback
      const v = args[i + 1] ?? fallback
      args.splice(i, 2)
      return v
    },
  }
}

/**
 * Sums each item's weight under the owners `owner` gives it: one name, several (an inclusive
 * view: every owner on the stack), or none (the item is not counted).
 */
export function attribute<T>(items: Iterable<T>, owner: (it: T) => string | Iterable<string> | undefined, weight: (it: T) => number): Map<string, number> {
  const out = new Map<string, number>()
  for (const it of items) {
    const o = owner(it)
    if (o === undefined) continue
    const w = weight(it)
    if (typeof o === 'string') out.set(o, (out.get(o) ?? 0) + w)
    else for (const k of o) out.set(k, (out.get(k) ?? 0) + w)
  }
  return out
}

/** The `top` largest owners, largest first. */
export function largest(sums: Map<string, number>, top: number): [string, number][] {
  return [...sums].sort((a, b) => b[1] - a[1]).slice(0, top)
}

/** Items grouped by a key (insertion order of first appearance), without copying a group per item. */
export function groupBy<T>(items: Iterable<T>, key: (it: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>()
  for (const it of items) {
    const k = key(it)
    const list = out.get(k)
    if (list) list.push(it)
    else out.set(k, [it])
  }
  return out
}
