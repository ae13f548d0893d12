// What bench:proxy reports: every run's figures per target (flat: one number per metric), and over
// the runs each metric's spread (min / median / max) and corral's ratios to squid ssl-bump and to
// the Node floor (computed per run, then spread; for added latencies the difference in ms instead).
// Also the Markdown table the README carries.
import { round } from './proxy-load.js'

export type Metrics = Record<string, number | null>
export interface RunRecord {
  run: number
  started: string
  loadavg_before: number[]
  loadavg_after: number[]
  /** what the rate of the "third" latency phase was: a third of corral's own closed-loop maximum */
  third_rate: number
  targets: Record<string, Metrics>
  /** Each open-loop window (ms since the epoch): where an appender's trace is laid over it. */
  windows?: Array<{ target: string; phase: string; from: number; to: number }>
}
export interface Spread { min: number; median: number; max: number; n: number }

export function spread(xs: number[]): Spread | null {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b)
  if (!s.length) return null
  const mid = s.length >> 1
  const median = s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
  return { min: s[0]!, median: round(median, 3), max: s[s.length - 1]!, n: s.length }
}

/** The metrics the ratios are given for (corral's figure over the peer's, same run). */
export const RATIO_METRICS = [
  'closed_rps', 'cpu_ms_per_req', 'r500_cpu_ms_per_req', 'r500_added_p50_ms', 'r500_added_p99_ms', 'third_added_p50_ms', 'third_added_p99_ms',
  'sse_rps', 'sse_cpu_ms_per_stream', 'mcp_rps', 'mcp_cpu_ms_per_call', 'h2_rps', 'h2_cpu_ms_per_req', 'ws_messages_per_s', 'ws_rtt_added_p50_ms', 'rss_mb',
] as const

export function summarize(runs: RunRecord[]): { spread: Record<string, Record<string, Spread>>; ratios: Record<string, Record<string, Spread>> } {
  const out: Record<string, Record<string, Spread>> = {}
  const names = new Set(runs.flatMap((r) => Object.keys(r.targets)))
  for (const name of names) {
    const keys = new Set(runs.flatMap((r) => Object.keys(r.targets[name] ?? {})))
    const m: Record<string, Spread> = {}
    for (const k of keys) {
      const s = spread(runs.map((r) => r.targets[name]?.[k]).filter((x): x is number => typeof x === 'number'))
      if (s) m[k] = s
    }
    out[name] = m
  }
  const ratios: Record<string, Record<string, Spread>> = {}
  // corral over its peers; another layout or build of corral over this one.
  const pairs = [['corral', 'squid-bump'], ['corral', 'node-floor'], ['corral-base', 'corral'], ...[...names].filter((n) => /^corral-w\d+$/.test(n)).map((n) => [n, 'corral'])]
  for (const [mine, peer] of pairs as [string, string][]) {
    const m: Record<string, Spread> = {}
    for (const k of [...RATIO_METRICS, 'closed_cores']) {
      const xs = runs.map((r) => {
        const c = r.targets[mine]?.[k]
        const p = r.targets[peer]?.[k]
        if (typeof c !== 'number' || typeof p !== 'number') return NaN
        // Added latencies are compared by difference (over direct they can be 0 or below): ms more than the peer.
        return k.includes('_added_') ? round(c - p, 2) : p !== 0 ? round(c / p, 2) : NaN
      })
      const s = spread(xs)
      if (s) m[k] = s
    }
    if (Object.keys(m).length) ratios[`${mine}/${peer}`] = m
  }
  return { spread: out, ratios }
}

const fmt = (s: Spread | undefined, d = 2): string => (!s ? '—' : s.min === s.max ? String(round(s.median, d)) : `${round(s.median, d)} (${round(s.min, d)}–${round(s.max, d)})`)

/** The README's table: medians with the range over the runs, corral next to its peers, and corral's ratios. */
export function markdownTable(s: ReturnType<typeof summarize>, columns: string[]): string {
  const cols = columns.filter((c) => s.spread[c])
  const peers = ['squid-bump', 'node-floor'].filter((p) => s.ratios[`corral/${p}`])
  const cells = (xs: string[]): string => xs.map((x) => ` ${x} |`).join('')
  const row = (label: string, key: string, d = 2): string =>
    `| ${label} |${cells(cols.map((c) => fmt(s.spread[c]![key], d)))}${cells(peers.map((p) => fmt(s.ratios[`corral/${p}`]![key])))}`
  return [
    `| |${cells([...cols, ...peers.map((p) => `corral / ${p} (added latency: corral − ${p}, ms)`)])}`, `|---|${[...cols, ...peers].map(() => '---:').join('|')}|`,
    row('closed loop c=32, POST req/s', 'closed_rps', 0),
    row('CPU ms per POST (whole process tree)', 'cpu_ms_per_req', 3),
    row('added p50 at 500 req/s, ms', 'r500_added_p50_ms'),
    row('added p99 at 500 req/s, ms', 'r500_added_p99_ms'),
    row('added p50 at ⅓ of corral\'s max, ms', 'third_added_p50_ms'),
    row('added p99 at ⅓ of corral\'s max, ms', 'third_added_p99_ms'),
    row('SSE closed loop c=32, streams/s', 'sse_rps', 0),
    row('MCP tools/call c=32, calls/s', 'mcp_rps', 0),
    row('h2: one connection, 64 streams, req/s', 'h2_rps', 0),
    row('WebSocket messages/s (64 in flight)', 'ws_messages_per_s', 0),
    row('WebSocket added round trip p50, ms', 'ws_rtt_added_p50_ms', 3),
    row('RSS after the run, MB', 'rss_mb', 0),
  ].join('\n')
}

export function printRun(r: RunRecord): void {
  process.stdout.write(`run ${r.run} (${r.started}, load ${r.loadavg_before.join(' ')} → ${r.loadavg_after.join(' ')}, third rate ${r.third_rate}/s)\n`)
  for (const [name, m] of Object.entries(r.targets)) {
    const parts = Object.entries(m).filter(([, v]) => v !== null).map(([k, v]) => `${k}=${v}`)
    process.stdout.write(`  ${name.padEnd(22)} ${parts.join(' ')}\n`)
  }
}
