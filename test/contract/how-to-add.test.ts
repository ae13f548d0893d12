// docs/design.md "How to add" lists the files a newcomer touches to add a wire field, an enum value
// (and whatever other entries the section grows); each `src/…` path it names must still exist, so
// the list cannot silently point at a file that moved.
import { existsSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'

const ROOT = resolve(import.meta.dirname, '../..')

function howToAdd(): string {
  const doc = readFileSync(join(ROOT, 'docs/design.md'), 'utf8')
  const start = doc.indexOf('\n## How to add\n')
  expect(start).toBeGreaterThan(-1)
  const end = doc.indexOf('\n## ', start + 1)
  return doc.slice(start, end === -1 ? undefined : end)
}

describe('docs/design.md "How to add"', () => {
  const section = howToAdd()
  const paths = [...new Set([...section.matchAll(/`(src\/[^`\s]+)`/g)].map((m) => m[1]!))]

  it('names the files for a wire field, an enum value, a phase, a deny reason, a runtime and an audit event type', () => {
    for (const entry of ['**A field on a wire type**', '**An enum value**', '**A proxy phase**', '**A deny reason**', '**A runtime**', '**An audit event type**']) {
      expect(section).toContain(entry)
    }
    expect(paths).toEqual(expect.arrayContaining(['src/proxy/phase.ts', 'src/proxy/runner.ts', 'src/runtime/registry.ts', 'src/audit/mutation.ts']))
    expect(paths).toEqual(expect.arrayContaining(['src/contract/wire.ts', 'src/contract/resources.ts']))
  })

  it('names only files and folders that exist', () => {
    expect(paths.filter((p) => !existsSync(join(ROOT, p)))).toEqual([])
  })
})
