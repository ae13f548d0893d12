// GET /v1/openapi.json: generated from the route schemas (src/server/openapi.ts), valid OpenAPI 3.1,
// covering every /v1 route the app serves with its request and response schemas and the error
// envelope — and docs/api.md's route index names exactly the same operations. A route added without
// a success response schema, or a POST/PUT/PATCH without a body schema (or `openapi.noBody` /
// `openapi.body` in its config), fails here.
import SwaggerParser from '@apidevtools/swagger-parser'
import { readFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ERROR_CATALOGUE } from '../../src/contract/index.js'
import { createHarness, type Harness } from './harness.js'

let h: Harness
let doc: any
beforeAll(async () => {
  h = await createHarness()
  const r = await h.inject('GET', '/v1/openapi.json')
  expect(r.status).toBe(200)
  doc = r.body
})
afterAll(() => h?.close())

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const

/** "METHOD /path/{param}" of every operation in the document. */
function documented(): string[] {
  return Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, ops]) =>
    METHODS.filter((m) => ops[m]).map((m) => `${m.toUpperCase()} ${path}`),
  )
}

/** "METHOD /path/{param}" of every route the app serves under /v1 (HEAD aside), read from fastify's own route tree. */
function served(): string[] {
  const out: string[] = []
  const stack: string[] = []
  for (const line of h.app.printRoutes({ commonPrefix: false }).split('\n')) {
    const m = /^([│ ├└─]*)(\S.*?)(?: \(([A-Z, ]+)\))?$/.exec(line)
    if (!m) continue
    const depth = m[1].length / 4 - 1
    if (depth < 0) continue
    stack.length = depth
    const parent = depth === 0 ? '' : stack[depth - 1]
    const full = (parent.endsWith('/') || m[2].startsWith('/') ? parent : `${parent}/`) + m[2]
    stack[depth] = full
    for (const method of (m[3] ?? '').split(', ').filter((x) => x && x !== 'HEAD' && x !== 'OPTIONS')) {
      if (full.startsWith('/v1/')) out.push(`${method} ${full.replace(/:([A-Za-z_]+)/g, '{$1}')}`)
    }
  }
  return out
}

describe('GET /v1/openapi.json', () => {
  it('is served without a credential and is a valid OpenAPI 3.1 document', async () => {
    expect(doc.openapi).toBe('3.1.0')
    await SwaggerParser.validate(structuredClone(doc))
  })

  it('describes every /v1 route the app serves, and nothing else but the health routes', () => {
    const routes = served()
    expect(routes.length).toBeGreaterThan(50)
    expect(documented().filter((op) => op.includes(' /v1/')).sort()).toEqual([...routes].sort())
    expect(Object.keys(doc.paths).filter((p) => !p.startsWith('/v1/'))).toEqual(['/healthz', '/readyz'])
  })

  it('every operation has its success schema, its body schema, and the error envelope for 4XX and 5XX', () => {
    const missing: string[] = []
    for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
      for (const m of METHODS) {
        const op = ops[m]
        if (!op) continue
        const name = `${m.toUpperCase()} ${path}`
        const success = Object.entries(op.responses as Record<string, any>).filter(([s]) => /^2/.test(s))
        if (!success.some(([, r]) => r.content && Object.values(r.content as Record<string, any>).every((c) => c.schema))) missing.push(`${name}: no success response schema`)
        if (['post', 'put', 'patch'].includes(m) && !op.requestBody && !op['x-corral-no-body']) missing.push(`${name}: no request body schema (schema.body, config.openapi.body or config.openapi.noBody)`)
        for (const s of ['4XX', '5XX']) if (op.responses[s]?.content?.['application/json']?.schema?.$ref !== '#/components/schemas/ErrorEnvelope') missing.push(`${name}: ${s} is not the error envelope`)
        for (const param of path.match(/\{(\w+)\}/g) ?? []) {
          if (!(op.parameters ?? []).some((p: any) => p.in === 'path' && `{${p.name}}` === param && p.schema)) missing.push(`${name}: path parameter ${param} without schema`)
        }
      }
    }
    expect(missing).toEqual([])
  })

  it('the error envelope component lists every code of the catalogue', () => {
    const envelope = doc.components.schemas.ErrorEnvelope
    expect(envelope.required).toEqual(['error'])
    expect(envelope.properties.error.required).toEqual(['code', 'message', 'request_id'])
    expect(envelope.properties.error.properties.code.enum).toEqual(Object.keys(ERROR_CATALOGUE))
  })

  it('security: Bearer everywhere, ?api_key= also on the streams, none on the document itself and health', () => {
    expect(doc.security).toEqual([{ bearer: [] }])
    expect(doc.paths['/v1/activity/stream'].get.security).toEqual([{ bearer: [] }, { api_key: [] }])
    expect(doc.paths['/v1/activity/stream'].get.responses['200'].content['text/event-stream']).toBeDefined()
    expect(doc.paths['/v1/openapi.json'].get.security).toEqual([])
    expect(doc.paths['/healthz'].get.security).toEqual([])
  })

  it('the multipart routes describe their parts', () => {
    expect(doc.paths['/v1/tasks'].post.requestBody.content['multipart/form-data'].schema.properties.file).toBeDefined()
    expect(doc.paths['/v1/tasks'].post.requestBody.content['application/json'].schema.required).toEqual(['description'])
    expect(doc.paths['/v1/packs/upload'].post.requestBody.content['multipart/form-data'].schema.required).toEqual(['archive'])
  })
})

describe("docs/api.md's route index", () => {
  it('names exactly the operations of the document', () => {
    const text = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8')
    const section = text.slice(text.indexOf('## Route index'), text.indexOf('\n## ', text.indexOf('## Route index') + 5))
    expect(section.length).toBeGreaterThan(100)
    const listed = [...section.matchAll(/^\| `(GET|POST|PUT|PATCH|DELETE) (\/\S+)` \|/gm)].map((m) => `${m[1]} ${m[2]}`)
    expect([...listed].sort()).toEqual(documented().sort())
    expect(new Set(listed).size).toBe(listed.length)
  })
})
