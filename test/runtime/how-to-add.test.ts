// docs/design.md "How to add a runtime" lists the files a new runtime touches: each must still
// exist, or the page sends a newcomer to a file that moved.
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { RUNTIME_KINDS, RUNTIMES, runtimeKindsHelp } from '../../src/runtime/index.js'

const root = join(import.meta.dirname, '..', '..')
const design = readFileSync(join(root, 'docs', 'design.md'), 'utf8')
const section = design.slice(design.indexOf('## How to add a runtime'), design.indexOf('\n## ', design.indexOf('## How to add a runtime') + 3))

describe('docs/design.md "How to add a runtime"', () => {
  it('exists and names files', () => {
    expect(section.startsWith('## How to add a runtime')).toBe(true)
    expect(section.match(/`((?:src|test|docs)\/[^`<>]+\.(?:ts|md|cjs))`/g)?.length ?? 0).toBeGreaterThan(5)
  })

  it('every file it names exists', () => {
    const files = [...section.matchAll(/`((?:src|test|docs)\/[^`<>]+\.(?:ts|md|cjs))`/g)].map((m) => m[1]!)
    const short = [...section.matchAll(/`((?:runtime|workspaces|serve)\/[^`<>]+\.ts)`/g)].map((m) => `src/${m[1]}`)
    for (const file of [...files, ...short]) expect(existsSync(join(root, file)), file).toBe(true)
  })

  it('every registered kind is a --runtime option with its summary', () => {
    expect(RUNTIME_KINDS).toEqual(Object.keys(RUNTIMES))
    for (const kind of RUNTIME_KINDS) expect(runtimeKindsHelp()).toContain(`${kind} (${RUNTIMES[kind].summary})`)
  })
})
