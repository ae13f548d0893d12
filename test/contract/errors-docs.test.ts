import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { ERROR_CATALOGUE } from '../../src/contract/index.js'

describe('error catalogue', () => {
  it('docs/api.md lists exactly the codes in src/server/errors.ts, with the same statuses', () => {
    const doc = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8')
    const section = doc.split('## Error codes')[1].split('\n## ')[0]
    const documented = Object.fromEntries([...section.matchAll(/^\| `([a-z_]+)` \| (\d{3}) \|/gm)].map((m) => [m[1], Number(m[2])]))
    const inCode = Object.fromEntries(Object.entries(ERROR_CATALOGUE).map(([code, e]) => [code, e.status]))
    expect(documented).toEqual(inCode)
  })
})

describe('error codes used in the code base', () => {
  it('every code thrown with a literal is in the catalogue with the same status', async () => {
    const { readdirSync, statSync } = await import('node:fs')
    const { join } = await import('node:path')
    const root = new URL('../../src/', import.meta.url).pathname
    const files: string[] = []
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const p = join(dir, name)
        if (statSync(p).isDirectory()) walk(p)
        else if (p.endsWith('.ts')) files.push(p)
      }
    }
    walk(root)
    const problems: string[] = []
    for (const file of files) {
      const text = readFileSync(file, 'utf8')
      for (const m of text.matchAll(/apiError\(\s*'([a-z_]+)'/g)) if (!(m[1] in ERROR_CATALOGUE)) problems.push(`${file}: apiError('${m[1]}')`)
      for (const m of text.matchAll(/new CorralError\(\s*'([a-z_]+)',[^,]*,\s*(\d{3})/g)) {
        const entry = (ERROR_CATALOGUE as Record<string, { status: number }>)[m[1]]
        if (!entry || entry.status !== Number(m[2])) problems.push(`${file}: CorralError('${m[1]}', …, ${m[2]})`)
      }
    }
    expect(problems).toEqual([])
  })
})
