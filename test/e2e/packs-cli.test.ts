// `corral pack …` as a user runs it (node bin/run.js) against a real `corral serve`: upload the
// example pack directory, list/show/update/re-upload/clone it, attach it to a role by name in
// role.yaml, the in-use guard on delete, a second org cloning the community pack, and a bad archive
// refused with one line. No HTTP mocks.
import { cpSync, readFileSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { create } from 'tar'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { PackRecord } from '../../src/client/packs.js'
import type { AgentRoleRecord } from '../../src/client/roles.js'
import { runCorral, startStack, type RunningServe, type Stack } from '../helpers/serve.js'

const HELLO = resolve(import.meta.dirname, '../../examples/packs/hello-pack')

let stack: Stack
let serve: RunningServe
let dir: string

beforeAll(async () => {
  stack = await startStack()
  ;({ serve, dir } = stack)
})
afterAll(() => stack?.close())

const corral = (...args: string[]) => stack.corral(args)

async function json<T>(...args: string[]): Promise<T> {
  const r = await corral(...args, '--json')
  expect(r.code, `${args.join(' ')}\n${r.stderr}\n${r.stdout}`).toBe(0)
  return JSON.parse(r.stdout) as T
}

/** A refusal: exit 1, nothing on stdout, exactly one `Error: … [code]` line on stderr. */
async function refused(code: string, ...args: string[]): Promise<string> {
  const r = await corral(...args)
  expect(r.code, `${args.join(' ')}\n${r.stderr}`).toBe(1)
  expect(r.stdout).toBe('')
  const lines = r.stderr.trimEnd().split('\n')
  expect(lines, r.stderr).toHaveLength(1)
  expect(lines[0]).toMatch(new RegExp(`^Error: .*\\[${code}\\]`))
  return lines[0]
}

// Each CLI run is a fresh node process (about a second on a loaded 2-core machine): 21 runs in all.
describe('corral pack commands', { timeout: 120_000 }, () => {
  let hello: PackRecord

  it('uploads the example directory, then lists, shows, updates, re-uploads and clones it', async () => {
    hello = await json<PackRecord>('pack', 'upload', HELLO)
    expect(hello).toMatchObject({
      name: 'hello-pack', version: '1.0.0', display_name: 'Hello pack', category: 'examples',
      owned: true, visibility: 'org', tier: 'community', image_origin: 'upload',
      image_digest: expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
    })
    expect(hello.capabilities).toBe(readFileSync(join(HELLO, 'caps.yaml'), 'utf8'))
    expect(hello.size_bytes).toBeGreaterThan(0)

    const list = await corral('pack', 'list')
    expect(list.code).toBe(0)
    expect(list.stdout).toMatch(/^NAME\s+VERSION\s+TIER\s+VISIBILITY\s+OWNED/)
    expect(list.stdout).toMatch(new RegExp(`hello-pack\\s+1\\.0\\.0\\s+community\\s+org\\s+yes\\s+examples\\s+.*${hello.id}`))

    const shown = await corral('pack', 'show', 'hello-pack')
    expect(shown.code).toBe(0)
    expect(shown.stdout).toMatch(new RegExp(`^image_digest\\s+${hello.image_digest}$`, 'm'))
    expect(shown.stdout).toContain('capabilities:\n  # Read-only access to the GitHub API')

    const updated = await json<PackRecord>('pack', 'update', 'hello-pack', '--visibility', 'community', '--description', 'for everyone')
    expect(updated).toMatchObject({ id: hello.id, visibility: 'community', description: 'for everyone' })

    // Another org sees the community pack (not owned, no org_id) and clones it into its own catalogue.
    const other = await runCorral(['admin', 'org', 'create', 'other', '--json', '--data-dir', serve.dataDir])
    expect(other.code, other.stderr).toBe(0)
    const otherKey = (JSON.parse(other.stdout) as { api_key: { value: string } }).api_key.value
    const asOther = (...args: string[]) => runCorral([...args, '--json'], { env: { XDG_CONFIG_HOME: dir, CORRAL_API_URL: serve.url, CORRAL_TOKEN: otherKey } })
    const seen = JSON.parse((await asOther('pack', 'list')).stdout) as PackRecord[]
    expect(seen).toEqual([expect.objectContaining({ id: hello.id, owned: false, visibility: 'community' })])
    expect(seen[0]).not.toHaveProperty('org_id')
    const theirs = JSON.parse((await asOther('pack', 'clone', 'hello-pack')).stdout) as PackRecord
    expect(theirs).toMatchObject({ name: 'hello-pack', owned: true, visibility: 'org', image_origin: 'clone', image_digest: hello.image_digest })

    // Same tree, new version: the re-upload keeps the pack's id and changes its contents.
    const v2 = join(dir, 'hello-v2')
    cpSync(HELLO, v2, { recursive: true })
    writeFileSync(join(v2, 'pack.yaml'), readFileSync(join(HELLO, 'pack.yaml'), 'utf8').replace('version: 1.0.0', 'version: 1.1.0'))
    const again = await json<PackRecord>('pack', 'reupload', 'hello-pack', v2)
    expect(again).toMatchObject({ id: hello.id, version: '1.1.0', visibility: 'community' })
    expect(again.image_digest).not.toBe(hello.image_digest)
    hello = again

    const copy = await json<PackRecord>('pack', 'clone', 'hello-pack', '--name', 'hello-copy')
    expect(copy).toMatchObject({ name: 'hello-copy', owned: true, visibility: 'org', tier: 'community', image_origin: 'clone', image_digest: hello.image_digest })
    expect(copy.id).not.toBe(hello.id)
    expect((await json<PackRecord[]>('pack', 'list', '--owned')).map((p) => p.name).sort()).toEqual(['hello-copy', 'hello-pack'])
  })

  it('attaches the pack to a role by name; delete is refused while the role attaches it', async () => {
    await json('provider', 'create', 'claude', '--kind', 'anthropic', '--base-url', 'https://api.anthropic.com')
    writeFileSync(join(dir, 'coder.yaml'), 'name: coder\nprovider: claude\npacks: [hello-pack]\n')
    const role = await json<AgentRoleRecord>('role', 'create', '-f', join(dir, 'coder.yaml'))
    expect(role.pack_ids).toEqual([hello.id])
    const shown = await corral('role', 'show', 'coder')
    expect(shown.stdout).toMatch(new RegExp(`^pack_ids\\s+hello-pack \\(${hello.id}\\)$`, 'm'))

    writeFileSync(join(dir, 'ghost.yaml'), 'name: ghost\nprovider: claude\npacks: [hello-pack, no-such-pack]\n')
    expect(await refused('not_found', 'role', 'create', '-f', join(dir, 'ghost.yaml'))).toContain('no pack named no-such-pack')

    expect(await refused('pack_in_use', 'pack', 'delete', 'hello-pack')).toContain('(roles: coder)')
    const inUse = await corral('pack', 'delete', 'hello-pack', '--json')
    expect(inUse.code).toBe(1)
    expect(JSON.parse(inUse.stdout).error).toMatchObject({ code: 'pack_in_use', details: { roles: [role.id] } })

    expect((await corral('role', 'archive', 'coder')).code).toBe(0)
    expect(await json('pack', 'delete', 'hello-pack')).toMatchObject({ id: hello.id, name: 'hello-pack', status: 'deleted' })
    // The clone has its own copy of the content: it outlives its source.
    expect(await json<PackRecord>('pack', 'show', 'hello-copy')).toMatchObject({ image_digest: hello.image_digest })
  })

  it('refuses an archive without pack.yaml with one line (exit 1); an unusable PATH is a usage error', async () => {
    const bare = join(dir, 'bare')
    cpSync(join(HELLO, 'files'), bare, { recursive: true })
    await create({ cwd: bare, gzip: true, file: join(dir, 'bare.tar.gz'), portable: true }, ['greeting.md', 'style.md'])
    expect(await refused('validation_error', 'pack', 'upload', join(dir, 'bare.tar.gz'))).toContain('pack.yaml')

    const local = await corral('pack', 'upload', bare)
    expect(local.code).toBe(2)
    expect(local.stderr).toContain('has no pack.yaml at its root')
  })
})
