// A role's `agent_kind` (docs/roles.md "Agent kind", a documented addition to the spec's Agent
// role) on the real app and store (SQLite, and Postgres when configured): it round-trips and
// reaches the workspace controller's role read; an unknown kind, a kind whose CLI does not speak
// the provider's API, and a kind beside an attached pack that provides the agent are field errors,
// on create and on PATCH (checked against the merged record); null clears it.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PackContent } from '../../src/packs/content.js'
import { demoPack } from '../packs/archives.js'
import { testDialects } from '../helpers/dialects.js'
import { createHarness, type Harness } from './harness.js'

const contentRoot = mkdtempSync(join(tmpdir(), 'corral-agent-kind-'))
afterAll(() => rmSync(contentRoot, { recursive: true, force: true }))

for (const d of testDialects()) describe(`agent role agent_kind [${d.name}]`, () => {
  let h: Harness
  beforeAll(async () => {
    h = await createHarness({ open: d.open })
    h.deps.packContent = new PackContent(join(contentRoot, d.name), { maxCompressedBytes: 64 * 1024, maxUncompressedBytes: 1024 * 1024, maxEntries: 100 })
  })
  afterAll(() => h.close())

  const setup = async () => {
    const org = await h.newOrg()
    const provider = async (name: string, kind: string, domain: string) =>
      (await h.inject('POST', '/v1/providers', { token: org.ownerToken, body: { name, kind, domain } })).body
    return {
      ...org,
      anthropic: await provider('claude', 'anthropic', 'api.anthropic.com'),
      openai: await provider('gpt', 'openai', 'api.openai.com'),
      gemini: await provider('gemini', 'gemini', 'generativelanguage.googleapis.com'),
    }
  }
  const fieldOf = (res: { status: number; body: any }) => {
    expect(res.status, JSON.stringify(res.body)).toBe(400)
    expect(res.body.error.code).toBe('validation_error')
    return res.body.error.details.fields as Record<string, string>
  }

  it('round-trips on create and PATCH, reaches the controller\'s role read, and null clears it', async () => {
    const { ownerToken, anthropic, gemini } = await setup()
    const created = await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'cc', provider_id: anthropic.id, agent_kind: 'claude-code' } })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    expect(created.body.agent_kind).toBe('claude-code')
    expect((await h.inject('GET', `/v1/agent-roles/${created.body.id}`, { token: ownerToken })).body.agent_kind).toBe('claude-code')
    expect((await h.store.workspaces.role(created.body.org_id, { id: created.body.id }))?.agent_kind).toBe('claude-code')

    const moved = await h.inject('PATCH', `/v1/agent-roles/${created.body.id}`, { token: ownerToken, body: { agent_kind: 'gemini-cli', provider_id: gemini.id } })
    expect(moved.status, JSON.stringify(moved.body)).toBe(200)
    expect(moved.body.agent_kind).toBe('gemini-cli')
    const cleared = await h.inject('PATCH', `/v1/agent-roles/${created.body.id}`, { token: ownerToken, body: { agent_kind: null, provider_id: anthropic.id } })
    expect(cleared.status, JSON.stringify(cleared.body)).toBe(200)
    expect(cleared.body.agent_kind).toBeUndefined()
    expect((await h.store.workspaces.role(created.body.org_id, { id: created.body.id }))?.agent_kind).toBeNull()
    const plain = await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'plain', provider_id: anthropic.id } })
    expect(plain.body.agent_kind).toBeUndefined()
  })

  it('refuses an unknown kind and a kind that does not speak the provider\'s API, on create and on PATCH', async () => {
    const { ownerToken, anthropic, openai, gemini } = await setup()
    const create = (name: string, provider_id: string, agent_kind: unknown) =>
      h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name, provider_id, agent_kind } })
    expect(Object.keys(fieldOf(await create('a', anthropic.id, 'aider'))).join(' ')).toMatch(/agent_kind/)
    expect(fieldOf(await create('b', openai.id, 'claude-code')).agent_kind).toMatch(/claude-code cannot use provider gpt \(kind openai\); it speaks anthropic/)
    expect(fieldOf(await create('c', anthropic.id, 'gemini-cli')).agent_kind).toMatch(/gemini-cli cannot use provider claude/)
    expect(fieldOf(await create('d', gemini.id, 'corral')).agent_kind).toMatch(/corral cannot use provider gemini/)
    expect((await create('e', openai.id, 'codex')).status).toBe(201)
    expect((await create('f', openai.id, 'opencode')).status).toBe(201)

    const role = (await create('g', anthropic.id, 'claude-code')).body
    // The merged record counts: a new provider against the saved kind, a new kind against the saved provider.
    expect(fieldOf(await h.inject('PATCH', `/v1/agent-roles/${role.id}`, { token: ownerToken, body: { provider_id: openai.id } })).agent_kind).toMatch(/claude-code cannot use provider gpt/)
    expect(fieldOf(await h.inject('PATCH', `/v1/agent-roles/${role.id}`, { token: ownerToken, body: { agent_kind: 'codex' } })).agent_kind).toMatch(/codex cannot use provider claude/)
    expect((await h.inject('GET', `/v1/agent-roles/${role.id}`, { token: ownerToken })).body).toMatchObject({ agent_kind: 'claude-code', provider_id: anthropic.id })
  })

  it('refuses a kind beside an attached pack that provides the agent, whichever comes second', async () => {
    const { ownerToken, anthropic } = await setup()
    const { payload, headers } = await multipartPack(await demoPack({ name: 'own-agent' }))
    const pack = (await h.app.inject({ method: 'POST', url: '/v1/packs/upload', payload, headers: { ...headers, authorization: `Bearer ${ownerToken}` } })).json()
    expect(pack.id).toMatch(/^pack_/)
    const both = await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'both', provider_id: anthropic.id, agent_kind: 'claude-code', pack_ids: [pack.id] } })
    expect(fieldOf(both).agent_kind).toMatch(/cannot be set while pack own-agent provides the agent/)

    const withPack = (await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'with-pack', provider_id: anthropic.id, pack_ids: [pack.id] } })).body
    expect(fieldOf(await h.inject('PATCH', `/v1/agent-roles/${withPack.id}`, { token: ownerToken, body: { agent_kind: 'claude-code' } })).agent_kind).toMatch(/own-agent provides the agent/)
    const withKind = (await h.inject('POST', '/v1/agent-roles', { token: ownerToken, body: { name: 'with-kind', provider_id: anthropic.id, agent_kind: 'claude-code' } })).body
    expect(fieldOf(await h.inject('PATCH', `/v1/agent-roles/${withKind.id}`, { token: ownerToken, body: { pack_ids: [pack.id] } })).agent_kind).toMatch(/own-agent provides the agent/)
    // Clearing the kind and attaching the pack in one PATCH is fine: the pack's agent runs.
    const swapped = await h.inject('PATCH', `/v1/agent-roles/${withKind.id}`, { token: ownerToken, body: { agent_kind: null, pack_ids: [pack.id] } })
    expect(swapped.status, JSON.stringify(swapped.body)).toBe(200)
  })
})

async function multipartPack(archive: Buffer): Promise<{ payload: Buffer; headers: Record<string, string> }> {
  const boundary = `----corral${Math.random().toString(16).slice(2)}`
  const payload = Buffer.concat([
    Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="archive"; filename="archive.tgz"\r\ncontent-type: application/gzip\r\n\r\n`),
    archive, Buffer.from(`\r\n--${boundary}--\r\n`),
  ])
  return { payload, headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } }
}
