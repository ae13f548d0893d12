// `corral serve` with CORRAL_PACK_REGISTRY keeps what replicas share in the registry, end to end
// on real processes and the real registry: the uploaded pack is pushed; a task's snapshot lands as
// the workspace's catalog in `<namespace>/corral-snapshots/<id>` and lists through the API; a pack
// tree missing from this replica's disk (another replica received the upload) is pulled back by
// digest before the next agent starts, and that task completes (docs/workspaces.md "Snapshots in
// the registry", docs/packs.md "Pack trees on every replica").
import { existsSync, readFileSync, rmSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { create as tar } from 'tar'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { registryAvailable, startRegistry, type TestRegistry } from '../helpers/registry.js'
import { startStack, type Stack } from '../helpers/serve.js'
import { bwrapAvailable } from '../runtime/helpers.js'

const available = registryAvailable()
const RUNTIME = (await bwrapAvailable()) ? 'local' : 'process'
const PACK_DIR = resolve(import.meta.dirname, '../../examples/packs/shell-agent')
const CAPS = `
- name: agent_events
  type: http
  allow:
    - domains: ["corral.internal"]
      methods: [POST]
`

describe.skipIf(!available)(`serve's shared state in the registry (${RUNTIME} runtime)`, () => {
  let registry: TestRegistry
  let stack: Stack

  beforeAll(async () => {
    registry = await startRegistry()
    stack = await startStack({ runtime: RUNTIME, provider: { name: 'none' }, env: { CORRAL_PACK_REGISTRY: `${registry.host}/corral` } })
  }, 60_000)
  afterAll(async () => {
    await stack?.close()
    await registry?.stop()
  })

  it('snapshots go to the registry and list from it; a pack tree this replica lacks is pulled before the agent starts', async () => {
    const archive = join(stack.dir, 'shell-agent.tar.gz')
    await tar({ gzip: true, file: archive, cwd: PACK_DIR, portable: true }, ['pack.yaml', 'agent.sh'])
    const form = new FormData()
    form.set('archive', new Blob([readFileSync(archive)], { type: 'application/gzip' }), 'shell-agent.tar.gz')
    const uploaded = await fetch(`${stack.serve.url}/v1/packs/upload`, { method: 'POST', headers: { authorization: `Bearer ${stack.serve.adminKey}` }, body: form })
    const pack = (await uploaded.json()) as { id: string; image_digest: string; image_ref: string }
    expect(uploaded.status, JSON.stringify(pack)).toBe(201)
    expect(pack.image_ref).toMatch(new RegExp(`^${registry.host.replace(/\./g, '\\.')}/corral/`))
    const role = await stack.api('POST', '/agent-roles', { name: 'shell', provider_id: stack.provider!.id, capabilities: CAPS, pack_ids: [pack.id] })
    expect(role.status, JSON.stringify(role.body)).toBe(201)

    const first = await stack.api('POST', '/tasks', { role_name: 'shell', description: 'first' })
    expect(first.status, JSON.stringify(first.body)).toBe(202)
    const wsId = first.body.workspace_id as string
    expect(await stack.taskDone(first.body.task_id)).toMatchObject({ status: 'completed' })
    await stack.until(async () => (await stack.api('GET', `/workspaces/${wsId}`)).body.task_count === 1, 'the after-task snapshot')
    expect((await stack.api('GET', `/workspaces/${wsId}/snapshot/files`)).body.entries.map((e: { path: string }) => e.path)).toContain('shell-agent.txt')
    // The snapshot is in the registry, not in the workspace's local snapshot directory.
    const catalog = await fetch(`http://${registry.host}/v2/corral/corral-snapshots/${wsId}/manifests/catalog`, { headers: { accept: 'application/vnd.oci.image.manifest.v1+json' } })
    expect(catalog.status).toBe(200)
    expect(existsSync(join(stack.serve.dataDir, 'runtime', 'workspaces', wsId, 'snapshots', 'manifest.json'))).toBe(false)

    // As if another replica had received the upload: the tree is not on this one's disk.
    const tree = join(stack.serve.dataDir, 'packs', `sha256-${pack.image_digest.slice('sha256:'.length)}`)
    expect(existsSync(tree)).toBe(true)
    rmSync(tree, { recursive: true, force: true })
    const second = await stack.api('POST', `/workspaces/${wsId}/tasks`, { description: 'second' })
    expect(second.status, JSON.stringify(second.body)).toBe(202)
    expect(await stack.taskDone(second.body.task_id)).toMatchObject({ status: 'completed' })
    expect(existsSync(join(tree, 'agent.sh'))).toBe(true)
  }, 120_000)
})
