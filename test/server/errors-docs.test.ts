import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { ERROR_CATALOGUE } from '../../src/server/errors.js'

describe('error catalogue', () => {
  it('docs/api.md lists exactly the codes in src/server/errors.ts, with the same statuses', () => {
    const doc = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8')
    const section = doc.split('## Error codes')[1].split('\n## ')[0]
    const documented = Object.fromEntries([...section.matchAll(/^\| `([a-z_]+)` \| (\d{3}) \|/gm)].map((m) => [m[1], Number(m[2])]))
    const inCode = Object.fromEntries(Object.entries(ERROR_CATALOGUE).map(([code, e]) => [code, e.status]))
    expect(documented).toEqual(inCode)
  })
})
