// GET /v1/workspaces/{id}/logs over the real app, a real store and the workspace controller with
// the `process` runtime: the agent's own stdout/stderr, copied into the database while it runs
// (src/workspaces/log-shipper.ts), read as text or NDJSON, paged, followed over SSE with
// Last-Event-ID resume; capability tokens redacted; permissions, cross-org and bad input as
// envelopes; retention trims the oldest output. SQLite, and Postgres when CORRAL_TEST_PG_URL is set.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { workspaceLogs } from '../../src/store/index.js'
import { proxyTables } from '../../src/store/proxy-tables.js'
import { controllerRig, waitFor, type ControllerRig } from '../workspaces/harness.js'
import { testDialects } from '../helpers/dialects.js'
import { createHarness, type Harness } from './harness.js'

// Prints to both streams (its token among them), then waits for a `go` file and prints once more.
const AGENT = `
const { existsSync } = require('node:fs')
const { join } = require('node:path')
console.log('hello from the agent')
console.error('my token is ' + process.env.CORRAL_PROXY_TOKEN + ' and a jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4eHgifQ.c2lnbmF0dXJl')
const dir = process.env.CORRAL_WORKSPACE_DIR
const t = setInterval(() => { if (existsSync(join(dir, 'go'))) { clearInterval(t); console.log('second line'); process.exit(0) } }, 30)
`

for (const dialect of testDialects()) describe(`agent output: GET /v1/workspaces/{id}/logs (${dialect.name})`, () => {
  let h: Harness
  let rig: ControllerRig
  let org: Awaited<ReturnType<Harness['newOrg']>>
  let wsId: string
  let base: string

  beforeAll(async () => {
    h = await createHarness({ open: dialect.open })
    rig = await controllerRig(h.store, { agentCommand: [process.execPath, '-e', AGENT] })
    h.deps.lifecycle = { available: true, controller: rig.controller }
    h.deps.workspaces = { get: async (o, id) => { const w = await rig.controller.get(o, id); return w && { id: w.id, created_by: w.created_by } } }
    h.deps.config.taskRateLimit = false
    org = await h.newOrg()
    const t = proxyTables(h.store.db).workspaces
    await t.createRole(org.orgId, { name: 'coder', provider_id: await t.createProvider(org.orgId, { name: 'prov' }) })
    await h.app.listen({ port: 0, host: '127.0.0.1' })
    base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`
    const res = await h.inject('POST', '/v1/tasks', { token: org.ownerKey, body: { role_name: 'coder', description: 'print' } })
    expect(res.status).toBe(202)
    wsId = res.body.workspace_id
  })
  afterAll(async () => {
    await rig?.close()
    await h?.close()
  })

  const logs = (query = '', token = org.ownerKey, headers: Record<string, string> = {}) => h.inject('GET', `/v1/workspaces/${wsId}/logs${query}`, { token, headers })

  it('serves the running agent\'s stdout and stderr as text and NDJSON, tokens redacted, paged by after', async () => {
    const first = await waitFor(async () => {
      const r = await logs()
      return r.raw.includes('my token is') && r
    }, 'the agent output stored')
    expect(first.status).toBe(200)
    expect(first.headers['content-type']).toMatch(/^text\/plain/)
    expect(first.raw).toContain('hello from the agent\n')
    expect(first.raw).toContain('my token is [redacted] and a jwt [redacted]')
    expect(first.raw).not.toMatch(/eyJ/)
    const next = Number(first.headers['corral-log-next'])
    expect(next).toBeGreaterThan(0)

    const nd = await logs('?format=ndjson')
    const chunks = nd.raw.split('\n').filter(Boolean).map((l) => JSON.parse(l))
    expect(chunks.map((c) => c.text).join('')).toBe(first.raw)
    expect(chunks[0]).toEqual({ seq: 1, at: expect.any(String), text: expect.any(String) })

    // Nothing after the last seq yet; one byte per page still gives one whole chunk.
    expect((await logs(`?after=${next}`)).raw).toBe('')
    expect((await logs('?format=ndjson&limit_bytes=1')).raw.trim().split('\n')).toHaveLength(1)
  })

  it('follows over SSE and resumes after Last-Event-ID without repeating', async () => {
    const ac = new AbortController()
    const res = await fetch(`${base}/v1/workspaces/${wsId}/logs?follow=true`, { headers: { authorization: `Bearer ${org.ownerKey}` }, signal: ac.signal })
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/)
    const reader = res.body!.getReader()
    let text = ''
    const readUntil = async (needle: string) => {
      for (let i = 0; i < 200 && !text.includes(needle); i++) text += new TextDecoder().decode((await reader.read()).value)
      expect(text).toContain(needle)
    }
    await readUntil('hello from the agent')
    writeFileSync(join(rig.root, 'runtime', 'workspaces', wsId, 'data', 'go'), '')
    await readUntil('second line')
    ac.abort()
    const frames = text.split('\n\n').filter((f) => f.startsWith('event: log'))
    const ids = frames.map((f) => Number(/\nid: (\d+)/.exec(f)![1]))
    expect(ids).toEqual([...ids].sort((a, b) => a - b))
    expect(JSON.parse(/\ndata: (.*)/.exec(frames.at(-1)!)![1]).text).toContain('second line')

    // Resume after the first frame: the later frames only.
    const resumed = await logs('?format=ndjson', org.ownerKey, {})
    const all = resumed.raw.split('\n').filter(Boolean).map((l) => JSON.parse(l))
    const ac2 = new AbortController()
    const again = await fetch(`${base}/v1/workspaces/${wsId}/logs?follow=true`, { headers: { authorization: `Bearer ${org.ownerKey}`, 'last-event-id': String(all[0].seq) }, signal: ac2.signal })
    const r2 = again.body!.getReader()
    let t2 = ''
    for (let i = 0; i < 200 && !t2.includes('second line'); i++) t2 += new TextDecoder().decode((await r2.read()).value)
    ac2.abort()
    expect(t2).not.toContain(`id: ${all[0].seq}\n`)
    expect(t2).toContain(`id: ${all.at(-1).seq}\n`)
  })

  it('permissions and scope: read_only reads, another org and a member who is not the creator do not; bad input is a validation error', async () => {
    const ro = await h.key(org.orgId, 'read_only')
    expect((await logs('', ro.value)).status).toBe(200)
    const other = await h.newOrg()
    const cross = await logs('', other.ownerKey)
    expect(cross.status).toBe(404)
    expect(cross.body.error.code).toBe('workspace_not_found')
    const member = await h.member(org.orgId, 'member')
    const denied = await logs('', member.token)
    expect(denied.body.error.code).toBe('permission_denied')
    expect((await logs('?after=-1')).body.error.code).toBe('validation_error')
    expect((await logs('', org.ownerKey, { 'last-event-id': 'abc' })).body.error.code).toBe('validation_error')
    expect((await h.inject('GET', '/v1/workspaces/ws_nope/logs', { token: org.ownerKey })).body.error.code).toBe('workspace_not_found')
    expect((await h.inject('GET', `/v1/workspaces/${wsId}/logs`)).status).toBe(401)
  })

  it('retention keeps the newest output per workspace and says when older output was trimmed', async () => {
    const store = workspaceLogs(h.store)
    const res = await h.inject('POST', '/v1/tasks', { token: org.ownerKey, body: { role_name: 'coder', description: 'print' } })
    const id = res.body.workspace_id as string
    await waitFor(async () => (await store.read(id, { maxBytes: 1 << 20 })).chunks.length > 0, 'first output')
    writeFileSync(join(rig.root, 'runtime', 'workspaces', id, 'data', 'go'), '')
    await waitFor(async () => (await store.read(id, { maxBytes: 1 << 20 })).chunks.some((c) => c.text.includes('second line')), 'the last output')
    for (let i = 0; i < 10; i++) await store.append(id, `${'x'.repeat(99)}\n`, 300)
    const page = await store.read(id, { maxBytes: 1 << 20 })
    expect(page.chunks.map((c) => c.text.length)).toEqual([100, 100, 100])
    expect(page.truncated).toBe(true)
    const r = await h.inject('GET', `/v1/workspaces/${id}/logs`, { token: org.ownerKey })
    expect(r.headers['corral-log-truncated']).toBe('true')
  })

  it('retention is amortised: a workspace holds at most a quarter over the cap between trims, and a trim goes back to the cap', async () => {
    const store = workspaceLogs(h.store)
    const res = await h.inject('POST', '/v1/tasks', { token: org.ownerKey, body: { role_name: 'coder', description: 'print' } })
    const id = res.body.workspace_id as string
    const held = async () => (await store.read(id, { maxBytes: 1 << 20 })).chunks.reduce((n, c) => n + c.text.length, 0)
    // The agent prints its first line, then waits for a file this test never writes: no output of its own interleaves.
    await waitFor(async () => (await store.read(id, { maxBytes: 1 << 20 })).chunks.length > 0, 'first output')
    await store.append(id, 'x'.repeat(100), 1_000) // this writer's first append for it: trimmed at once, whatever the agent wrote
    expect(await held()).toBeLessThanOrEqual(1_000)
    const sizes: number[] = []
    for (let i = 0; i < 30; i++) {
      await store.append(id, 'y'.repeat(100), 1_000)
      sizes.push(await held())
    }
    expect(Math.max(...sizes)).toBeLessThanOrEqual(1_250)
    expect(sizes.some((n) => n > 1_000)).toBe(true) // not trimmed on every append
    expect(sizes.filter((n, i) => i > 0 && n < sizes[i - 1]!).every((n) => n <= 1_000)).toBe(true) // each trim back to the cap
  })
})
