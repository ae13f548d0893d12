// `corral provider …` and `corral role …` as a user runs them (node bin/run.js) against a real
// `corral serve`: role.yaml with a capabilities_file, compile diagnostics on a bad caps.yaml, the
// archive cascade and its refusals, exit codes and --json data. No HTTP mocks.
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { AgentRoleRecord, ProviderRecord } from '../../src/client/roles.js'
import { startStack, type Stack } from '../helpers/serve.js'
import { tgzOf } from '../packs/archives.js'

let stack: Stack
let dir: string

beforeAll(async () => {
  stack = await startStack()
  dir = stack.dir
})
afterAll(() => stack?.close())

const corral = (...args: string[]) => stack.corral(args)

async function json<T>(...args: string[]): Promise<T> {
  const r = await corral(...args, '--json')
  expect(r.code, `${args.join(' ')}\n${r.stderr}\n${r.stdout}`).toBe(0)
  return JSON.parse(r.stdout) as T
}

const CAPS = '- name: model\n  type: http\n  allow:\n    - domains: [api.anthropic.com]\n      methods: [POST]\n'

// Each CLI run is a fresh node process (about a second on a loaded 2-core machine).
describe('corral provider and role commands', { timeout: 120_000 }, () => {
  it('creates a provider and a role from role.yaml, shows, lists, updates and stops it', async () => {
    const provider = await json<ProviderRecord>('provider', 'create', 'claude', '--kind', 'anthropic', '--base-url', 'https://api.anthropic.com', '--default-model', 'claude-sonnet')
    expect(provider).toMatchObject({ name: 'claude', kind: 'anthropic', domain: 'api.anthropic.com' })

    // Roles attach only packs the org can see: upload one (content only, no agent of its own).
    const form = new FormData()
    form.append('archive', new Blob([await tgzOf([{ name: 'pack.yaml', body: 'name: base\nversion: "1"\n' }, { name: 'notes.md', body: 'base\n' }])]), 'base.tgz')
    const upload = await fetch(`${stack.serve.url}/v1/packs/upload`, { method: 'POST', headers: { authorization: `Bearer ${stack.serve.adminKey}` }, body: form })
    expect(upload.status).toBe(201)
    const packId = ((await upload.json()) as { id: string }).id

    // The caps file lives next to the role file; the path is relative to the role file, not the cwd.
    mkdirSync(join(dir, 'roles/policies'), { recursive: true })
    writeFileSync(join(dir, 'roles/policies/caps.yaml'), CAPS)
    writeFileSync(join(dir, 'roles/coder.yaml'), [
      'name: coder', 'display_name: Coder', 'provider: claude', 'capabilities_file: policies/caps.yaml', 'environment: staging',
      'task_timeout_seconds: 600', 'thinking_effort: low', 'pool_policy: static', 'pool_size: 1', `pack_ids: [${packId}]`, '',
    ].join('\n'))
    const role = await json<AgentRoleRecord>('role', 'create', '-f', join(dir, 'roles/coder.yaml'))
    expect(role).toMatchObject({
      name: 'coder', provider_id: provider.id, capabilities: CAPS, environment: 'staging', task_timeout_seconds: 600,
      thinking_effort: 'low', pool_policy: 'static', pool_size: 1, pack_ids: [packId],
    })

    const list = await corral('role', 'list')
    expect(list.code).toBe(0)
    expect(list.stdout).toMatch(/^NAME\s+PROVIDER\s+MODEL\s+ENVIRONMENT/)
    expect(list.stdout).toMatch(/coder\s+claude\s+staging\s+static 1\//)
    expect((await json<AgentRoleRecord>('role', 'show', 'coder')).id).toBe(role.id)
    const shown = await corral('role', 'show', role.id)
    expect(shown.stdout).toContain('capabilities:\n  - name: model')

    writeFileSync(join(dir, 'patch.yaml'), 'description: reviews code\npack_ids: []\n')
    const updated = await json<AgentRoleRecord>('role', 'update', 'coder', '-f', join(dir, 'patch.yaml'))
    expect(updated).toMatchObject({ description: 'reviews code', pack_ids: [], capabilities: CAPS })

    const stopped = await json<{ stopping: number }>('role', 'stop-workspaces', 'coder')
    expect(stopped.stopping).toBe(0)
  })

  it('archives a provider with its roles and shows the refusals until it is restored', async () => {
    const archived = await json<{ cascaded_roles: number }>('provider', 'archive', 'claude')
    expect(archived.cascaded_roles).toBe(1)
    expect(await json<AgentRoleRecord[]>('role', 'list')).toEqual([])
    const refused = await corral('role', 'unarchive', 'coder')
    expect(refused.code).toBe(1)
    expect(refused.stderr).toMatch(/provider claude is archived.*\[provider_archived\]/)
    const patchArchived = await corral('role', 'update', 'coder', '-f', join(dir, 'patch.yaml'), '--json')
    expect(patchArchived.code).toBe(1)
    expect(JSON.parse(patchArchived.stdout).error.code).toBe('role_archived')

    expect((await corral('provider', 'unarchive', 'claude')).code).toBe(0)
    const again = await corral('provider', 'unarchive', 'claude')
    expect(again.code).toBe(1)
    expect(again.stderr).toContain('[not_archived]')
    expect((await corral('role', 'unarchive', 'coder')).code).toBe(0)
    const inUse = await corral('provider', 'delete', 'claude')
    expect(inUse.code).toBe(1)
    expect(inUse.stderr).toContain('[provider_in_use]')
  })

  it('prints compile diagnostics like caps lint and exits 1; a malformed role file is a usage error', async () => {
    await json<ProviderRecord>('provider', 'create', 'gpt', '--kind', 'openai', '--domain', 'api.openai.com')
    writeFileSync(join(dir, 'bad-caps.yaml'), '- name: 9lives\n  type: http\n  allow:\n    - domains: [api.openai.com]\n')
    writeFileSync(join(dir, 'bad.yaml'), 'name: bad\nprovider: gpt\ncapabilities_file: bad-caps.yaml\n')
    const bad = await corral('role', 'create', '-f', join(dir, 'bad.yaml'))
    expect(bad.code).toBe(1)
    expect(bad.stderr).toMatch(/bad-caps\.yaml:1:9: error invalid_name /)
    expect(bad.stderr).toContain('  - name: 9lives\n          ^')
    expect(bad.stdout).toBe('')
    const badJson = await corral('role', 'create', '-f', join(dir, 'bad.yaml'), '--json')
    expect(badJson.code).toBe(1)
    expect(JSON.parse(badJson.stdout).error).toMatchObject({ code: 'invalid_capabilities', details: { diagnostics: expect.any(Array) } })
    expect(await json<AgentRoleRecord[]>('role', 'list', '--all', '--provider', 'gpt')).toEqual([])

    writeFileSync(join(dir, 'typo.yaml'), 'name: t\nprovider: gpt\nmodle: x\n')
    const typo = await corral('role', 'create', '-f', join(dir, 'typo.yaml'))
    expect(typo.code).toBe(2)
    expect(typo.stderr).toContain('unknown key modle')
    const missing = await corral('role', 'create', '-f', join(dir, 'nope.yaml'))
    expect(missing.code).toBe(2)
    const noProvider = await corral('role', 'show', 'ghost')
    expect(noProvider.code).toBe(1)
    expect(noProvider.stderr).toContain('[not_found]')
  })
})
