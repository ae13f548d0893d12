// docs/design.md "How to add a phase" and "How to add a deny reason" name files a newcomer edits:
// each must still exist, and the runner's chains must hold only phases of the one contract.
import { existsSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { PHASES } from '../../src/contract/index.js'

const root = new URL('../../', import.meta.url)
const design = readFileSync(new URL('docs/design.md', root), 'utf8')

function section(title: string): string {
  const start = design.indexOf(`## ${title}`)
  expect(start).toBeGreaterThanOrEqual(0)
  const end = design.indexOf('\n## ', start + 3)
  return design.slice(start, end < 0 ? undefined : end)
}

describe('docs/design.md how-to lists', () => {
  it.each(['How to add a phase', 'How to add a deny reason'])('every file "%s" names exists', (title) => {
    const files = [...section(title).matchAll(/`((?:src|test|docs)\/[\w./-]+\.(?:ts|md))`/g)].map((m) => m[1]!)
    expect(files.length).toBeGreaterThan(2)
    for (const f of files) expect(existsSync(new URL(f, root)), f).toBe(true)
  })

  it("the runner's chains are ProxyPhase steps with a row phase of the contract", () => {
    const runner = readFileSync(new URL('src/proxy/runner.ts', root), 'utf8')
    const steps = [...runner.matchAll(/\{ phase: '(\w+)', name: '[\w-]+', run: (\w+) \}/g)]
    expect(steps.length).toBeGreaterThan(5)
    for (const [, phase] of steps) expect(PHASES).toContain(phase)
    expect(runner).toMatch(/const ADMISSION: readonly PhaseStep\[\]/)
    expect(runner).toMatch(/const FORWARDING: readonly PhaseStep\[\]/)
  })
})
