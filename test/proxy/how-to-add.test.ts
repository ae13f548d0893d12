// docs/design.md "How to add" names the files a newcomer edits to add a proxy phase or a deny
// reason: each must still exist, and the runner's chains must hold only phases of the one contract.
import { existsSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { PHASES } from '../../src/contract/index.js'

const root = new URL('../../', import.meta.url)
const design = readFileSync(new URL('docs/design.md', root), 'utf8')

/** The entry `**title**` of the "How to add" section, up to the next entry or section. */
function entry(title: string): string {
  const section = design.slice(design.indexOf('\n## How to add\n'))
  const start = section.indexOf(`**${title}**`)
  expect(start).toBeGreaterThanOrEqual(0)
  const next = section.slice(start + 4).search(/\n\*\*|\n## /)
  return section.slice(start, next < 0 ? undefined : start + 4 + next)
}

describe('docs/design.md how-to lists', () => {
  it.each(['A proxy phase', 'A deny reason'])('every file "%s" names exists', (title) => {
    const files = [...entry(title).matchAll(/`((?:src|test|docs)\/[\w./-]+\.(?:ts|md))`/g)].map((m) => m[1]!)
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
