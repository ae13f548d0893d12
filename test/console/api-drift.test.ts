// The console's calls against the API's own description (issue 12 §4: the console's API client is
// checked against /v1/openapi.json so they cannot drift). Every call site in src/console/ —
// `api.get/raw/post/patch/del/call/upload(...)`, the `path`/`anchorPath` of `follow(...)` (the
// live streams) and `fetch('/v1/…')` — is read from the source with the TypeScript parser; its
// method and path must be an operation of the document, the keys of a literal query object must be
// that operation's query parameters, and the keys of a literal JSON body its body's properties. A
// call whose path is not written out at the call site fails too (except in the client itself).
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative, resolve } from 'node:path'
import ts from 'typescript'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createHarness, type Harness } from '../server/harness.js'

const ROOT = resolve(import.meta.dirname, '../../src/console')
/** Files whose calls take their paths from their callers (checked at those call sites). */
const PASS_THROUGH = new Set(['api.ts', 'sse.ts'])
const BY_METHOD: Record<string, string> = { get: 'GET', raw: 'GET', post: 'POST', patch: 'PATCH', del: 'DELETE' }

interface Call {
  where: string
  method: string
  path: string
  query?: string[]
  body?: string[]
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? sources(join(dir, d.name)) : /\.tsx?$/.test(d.name) && !d.name.endsWith('.config.ts') ? [join(dir, d.name)] : [],
  )
}

/** A string or template literal as a path pattern (`${…}` → `{}`); undefined when it is not one. */
function pattern(node: ts.Node | undefined): string | undefined {
  if (!node) return undefined
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text
  if (ts.isTemplateExpression(node)) return node.head.text + node.templateSpans.map((s) => `{}${s.literal.text}`).join('')
  return undefined
}

/** The property names of an object literal (spreads left out); undefined when it is not one. */
function keys(node: ts.Node | undefined): string[] | undefined {
  if (!node || !ts.isObjectLiteralExpression(node)) return undefined
  return node.properties.flatMap((p) => (p.name && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name)) ? [p.name.text] : []))
}

function property(node: ts.Node | undefined, name: string): ts.Expression | undefined {
  if (!node || !ts.isObjectLiteralExpression(node)) return undefined
  const p = node.properties.find((x) => x.name && ts.isIdentifier(x.name) && x.name.text === name)
  return p && ts.isPropertyAssignment(p) ? p.initializer : undefined
}

// long-function: one walk over the call shapes of the console's client
function callsIn(file: string, unresolved: string[]): Call[] {
  const text = readFileSync(file, 'utf8')
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, file.endsWith('x') ? ts.ScriptKind.TSX : ts.ScriptKind.TS)
  const name = relative(ROOT, file)
  const out: Call[] = []
  const where = (n: ts.Node) => `${name}:${source.getLineAndCharacterOfPosition(n.getStart()).line + 1}`
  const visit = (n: ts.Node) => {
    if (ts.isCallExpression(n)) {
      const callee = n.expression
      const args = n.arguments
      if (ts.isPropertyAccessExpression(callee)) {
        const m = callee.name.text
        const onApi = /\bapi\b|Api\(/.test(callee.expression.getText())
        if (onApi && (m in BY_METHOD || m === 'call' || m === 'upload')) {
          const [methodArg, pathArg, rest] = m in BY_METHOD ? [undefined, args[0], args[1]] : [args[0], args[1], args[2]]
          const method = methodArg ? pattern(methodArg) : BY_METHOD[m]
          const path = pattern(pathArg)
          if (!method || !path) {
            if (!PASS_THROUGH.has(name)) unresolved.push(`${where(n)} ${n.getText().slice(0, 80)}`)
          } else {
            const call: Call = { where: where(n), method, path }
            if (m === 'get' || m === 'raw') call.query = keys(rest)
            if (m === 'post' || m === 'patch') call.body = keys(rest)
            if (m === 'call') (call.query = keys(property(rest, 'query'))), (call.body = keys(property(rest, 'body')))
            out.push(call)
          }
        }
      } else if (ts.isIdentifier(callee) && callee.text === 'follow') {
        for (const key of ['path', 'anchorPath']) {
          const expr = property(args[1], key)
          if (!expr) continue
          const path = pattern(expr)
          if (path) out.push({ where: where(expr), method: 'GET', path, query: keys(property(args[1], 'query')) })
          else unresolved.push(`${where(expr)} follow ${key}`)
        }
      } else if (ts.isIdentifier(callee) && callee.text === 'fetch') {
        const path = pattern(args[0])
        if (path?.startsWith('/v1/')) out.push({ where: where(n), method: 'GET', path: path.slice(3) })
        else if (!PASS_THROUGH.has(name)) unresolved.push(`${where(n)} fetch`)
      }
    }
    ts.forEachChild(n, visit)
  }
  visit(source)
  return out
}

describe('the console calls only what /v1/openapi.json describes', () => {
  let h: Harness
  let doc: any
  beforeAll(async () => {
    h = await createHarness()
    doc = (await h.inject('GET', '/v1/openapi.json')).body
  })
  afterAll(() => h?.close())

  const operation = (method: string, path: string): any => {
    const norm = (p: string) => p.replace(/\{[^}]*\}/g, '{}').replace(/\/+$/, '')
    const found = Object.entries(doc.paths as Record<string, Record<string, unknown>>).find(([p]) => norm(p) === norm(`/v1${path.split('?')[0]}`))
    return found?.[1][method.toLowerCase()]
  }

  it('every call site names its path, and each is an operation with those query parameters and body fields', () => {
    const unresolved: string[] = []
    const calls = sources(ROOT).flatMap((f) => callsIn(f, unresolved))
    expect(unresolved).toEqual([])
    // The walk found the client's calls (a parser change that found none would pass vacuously).
    expect(calls.length).toBeGreaterThan(50)
    const problems: string[] = []
    for (const c of calls) {
      const op = operation(c.method, c.path)
      if (!op) {
        problems.push(`${c.where}: ${c.method} ${c.path} is not in the API description`)
        continue
      }
      const params = new Set(((op.parameters ?? []) as { in: string; name: string }[]).filter((p) => p.in === 'query').map((p) => p.name))
      for (const k of c.query ?? []) if (!params.has(k)) problems.push(`${c.where}: ${c.method} ${c.path} has no query parameter ${k}`)
      const schema = op.requestBody?.content?.['application/json']?.schema
      const fields = new Set(Object.keys(schema?.properties ?? {}))
      for (const k of c.body ?? []) if (!fields.has(k)) problems.push(`${c.where}: ${c.method} ${c.path} takes no body field ${k}`)
    }
    expect(problems).toEqual([])
  })
})
