// bench/perf-map.ts: a JIT address range named twice (freed by GC, reused by later code) keeps
// only its latest name, so a steady-state profile is not read as start-up code.
import { describe, expect, it } from 'vitest'
import { latestEntries } from '../../bench/perf-map.js'

describe('latestEntries', () => {
  it('keeps every entry when no ranges overlap, in their order', () => {
    const lines = ['1000 10 JS:*a x.js:1:1', '2000 20 JS:*b x.js:2:1', '1100 8 Builtins_c']
    expect(latestEntries(lines)).toEqual(lines)
  })

  it('drops an older entry a later one overlaps, whatever the overlap', () => {
    const lines = [
      '1000 100 JS:*parseSource node:internal/deps/cjs-module-lexer/lexer:85:22', // reused below
      '3000 10 JS:*kept x.js:1:1',
      '5000 40 JS:*tailOld x.js:1:1', // only its end overlaps the next
      '1040 20 JS:*check dist/audit/encode.js:53:22',
      '5030 40 JS:*tailNew x.js:2:1',
      '2000 10 JS:*outer y.js:1:1', // contained in the later entry
      '1f00 200 JS:*wide y.js:2:1',
    ]
    expect(latestEntries(lines)).toEqual([
      '3000 10 JS:*kept x.js:1:1',
      '1040 20 JS:*check dist/audit/encode.js:53:22',
      '5030 40 JS:*tailNew x.js:2:1',
      '1f00 200 JS:*wide y.js:2:1',
    ])
  })

  it('treats adjacent ranges as disjoint and skips lines it cannot read', () => {
    expect(latestEntries(['1000 10 JS:*a', 'garbage', '1010 10 JS:*b'])).toEqual(['1000 10 JS:*a', '1010 10 JS:*b'])
  })
})
