// bench:proxy's report arithmetic (bench/proxy-report.ts): the spread over runs and corral's
// ratios to its peers, which the README's table and docs/proxy.md are written from.
import { describe, expect, it } from 'vitest'
import { markdownTable, spread, summarize, type RunRecord } from '../../bench/proxy-report.js'

const run = (n: number, targets: RunRecord['targets']): RunRecord => ({ run: n, started: '', loadavg_before: [1, 1, 1], loadavg_after: [1, 1, 1], third_rate: 100, targets })

describe('bench:proxy report', () => {
  it('gives min, median and max, skipping missing figures', () => {
    expect(spread([3, 1, 2])).toEqual({ min: 1, median: 2, max: 3, n: 3 })
    expect(spread([4, 1, NaN, 2, 3])).toEqual({ min: 1, median: 2.5, max: 4, n: 4 })
    expect(spread([])).toBeNull()
  })

  it('computes ratios per run before their spread, and added latencies as differences', () => {
    const runs = [
      run(1, { corral: { closed_rps: 100, r500_added_p99_ms: 5 }, 'squid-bump': { closed_rps: 200, r500_added_p99_ms: -1 }, 'node-floor': { closed_rps: 100, r500_added_p99_ms: 2 } }),
      run(2, { corral: { closed_rps: 300, r500_added_p99_ms: 3 }, 'squid-bump': { closed_rps: 300, r500_added_p99_ms: 0 }, 'node-floor': { closed_rps: null, r500_added_p99_ms: 1 } }),
      run(3, { corral: { closed_rps: 150, r500_added_p99_ms: 4 }, 'squid-bump': { closed_rps: 200, r500_added_p99_ms: 1 }, 'node-floor': { closed_rps: 300, r500_added_p99_ms: 1 } }),
    ]
    const s = summarize(runs)
    // Per run 0.5, 1, 0.75 — not the ratio of the medians (150 / 200).
    expect(s.ratios['corral/squid-bump']!.closed_rps).toEqual({ min: 0.5, median: 0.75, max: 1, n: 3 })
    expect(s.ratios['corral/squid-bump']!.r500_added_p99_ms).toEqual({ min: 3, median: 3, max: 6, n: 3 })
    expect(s.ratios['corral/node-floor']!.closed_rps).toEqual({ min: 0.5, median: 0.75, max: 1, n: 2 })
    expect(s.spread.corral!.closed_rps).toEqual({ min: 100, median: 150, max: 300, n: 3 })
    const table = markdownTable(s, ['direct', 'corral', 'squid-bump', 'node-floor'])
    expect(table.split('\n')[0]).toBe('| | corral | squid-bump | node-floor | corral / squid-bump (added latency: corral − squid-bump, ms) | corral / node-floor (added latency: corral − node-floor, ms) |')
    expect(table).toContain('| closed loop c=32, POST req/s | 150 (100–300) | 200 (200–300) | 200 (100–300) | 0.75 (0.5–1) | 0.75 (0.5–1) |')
  })
})
