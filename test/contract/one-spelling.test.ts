// Every closed vocabulary of the contract (an `as const` list of strings in src/contract/) is spelled
// once: no other file of src/ may write the same set of values again, as an array or as a union of
// string literals. A re-spelled list drifts (a state added to the store but not to the console's
// filter); the copy must import the contract's list or type instead.
import { readFileSync, readdirSync } from 'node:fs'
import { join, relative, resolve } from 'node:path'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

const ROOT = resolve(import.meta.dirname, '../..')
const SRC = join(ROOT, 'src')
const CONTRACT = join(SRC, 'contract')

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.tsx?$/.test(e.name) && !e.name.endsWith('.d.ts'))
    .map((e) => join(e.parentPath, e.name))
}

interface Spelling { file: string; line: number; key: string; text: string }

/** String lists (≥ 2 values) written as array literals or as unions of string literal types. */
function spellings(file: string, text = readFileSync(file, 'utf8')): Spelling[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, file.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS)
  const out: Spelling[] = []
  const add = (node: ts.Node, values: string[]) => {
    const set = [...new Set(values)].sort()
    if (set.length < 2) return
    out.push({ file: relative(ROOT, file), line: sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1, key: JSON.stringify(set), text: node.getText(sf).slice(0, 120) })
  }
  const visit = (node: ts.Node): void => {
    if (ts.isArrayLiteralExpression(node) && node.elements.length >= 2 && node.elements.every(ts.isStringLiteral)) {
      add(node, node.elements.map((e) => (e as ts.StringLiteral).text))
    } else if (ts.isUnionTypeNode(node) && node.types.every((t) => ts.isLiteralTypeNode(t) && ts.isStringLiteral(t.literal))) {
      add(node, node.types.map((t) => ((t as ts.LiteralTypeNode).literal as ts.StringLiteral).text))
    }
    ts.forEachChild(node, visit)
  }
  visit(sf)
  return out
}

function vocabularies(): Map<string, Spelling> {
  const byKey = new Map<string, Spelling>()
  for (const file of sourceFiles(CONTRACT)) for (const s of spellings(file)) if (!byKey.has(s.key)) byKey.set(s.key, s)
  return byKey
}

function respelled(files: string[], read?: (file: string) => string): string[] {
  const contract = vocabularies()
  const found: string[] = []
  for (const file of files) {
    for (const s of spellings(file, read?.(file))) {
      const own = contract.get(s.key)
      if (own) found.push(`${s.file}:${s.line} re-spells ${own.file}:${own.line} (${s.text})`)
    }
  }
  return found
}

describe('the contract’s vocabularies are spelled once', () => {
  it('has the vocabularies this check guards', () => {
    const texts = [...vocabularies().values()].map((s) => s.key)
    for (const v of [['full_access', 'read_only', 'submit_observe'], ['admin', 'member', 'owner'], ['archived', 'busy', 'idle', 'provisioning', 'stopped', 'stopping']]) {
      expect(texts).toContain(JSON.stringify(v))
    }
  })

  it('finds a re-spelled list, as an array, a union or in another order', () => {
    const file = join(SRC, 'server', 'example.ts')
    const text = [
      "export const SETS = ['read_only', 'full_access', 'submit_observe'] as const",
      "export type Order = 'desc' | 'asc'",
      "export const fine = ['read_only', 'full_access']",
    ].join('\n')
    expect(respelled([file], () => text)).toEqual([
      expect.stringMatching(/^src\/server\/example\.ts:1 re-spells src\/contract\/resources\.ts:\d+/),
      expect.stringMatching(/^src\/server\/example\.ts:2 re-spells src\/contract\/resources\.ts:\d+/),
    ])
  })

  it('finds none in src/ outside src/contract/', () => {
    const files = sourceFiles(SRC).filter((f) => !f.startsWith(CONTRACT + '/'))
    expect(respelled(files)).toEqual([])
  })
})
