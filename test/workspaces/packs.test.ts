// Packs in workspaces through the controller (docs/workspaces.md "Packs"), on a real store, the
// real content store and the `process` runtime: a role's packs are mounted for its agent, the
// agent a pack provides runs instead of the default (cold and as a warm pool member's agent), its
// events must also satisfy the pack's schemas, and a role change applies to the next agent.
import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { create as tar } from 'tar'
import { afterEach, describe, expect, it } from 'vitest'
import { PackContent } from '../../src/packs/content.js'
import type { PackSource } from '../../src/workspaces/packs.js'
import type { Store } from '../../src/store/index.js'
import { testDialects } from '../helpers/dialects.js'
import { controllerRig, waitFor, type ControllerRig, type RigOptions } from './harness.js'

// Writes what it saw to warm.json (started ahead, CORRAL_TASK_SOURCE=http; then waits to be
// stopped) or report.json (a task from the inbox; then exits).
const AGENT = `import { readFileSync, writeFileSync } from 'node:fs'
const env = process.env
const seen = {
  argv: process.argv.slice(1), cwd: process.cwd(), packs: env.CORRAL_PACKS, packs_dir: env.CORRAL_PACKS_DIR, pack_dir: env.CORRAL_PACK_DIR,
  events_url: env.CORRAL_EVENTS_URL, greeting: env.PACK_GREETING ?? null, workspace_dir: env.CORRAL_WORKSPACE_DIR,
  notes: readFileSync(env.CORRAL_PACKS_DIR + '/notes/notes.txt', 'utf8'),
}
if (env.CORRAL_TASK_SOURCE === 'http') {
  writeFileSync('warm.json', JSON.stringify(seen))
  setInterval(() => {}, 1000)
} else {
  const [task] = JSON.parse(readFileSync(env.CORRAL_INBOX + '/tasks.json', 'utf8'))
  writeFileSync('report.json', JSON.stringify({ ...seen, task: task.description }))
}
`
const AGENT_YAML = `name: pack-agent
version: 1.0.0
agent:
  command: [node, ./agent.mjs]
  env: { PACK_GREETING: hello, CORRAL_WORKSPACE_DIR: /not-yours }
agent_events:
  progress_status:
    type: object
    required: [percent]
    properties: { percent: { type: integer, minimum: 0, maximum: 100 } }
`

/** Packs an archive from files and stores it the way an upload does: content store, then a row. */
async function uploadPack(store: Store, content: PackContent, orgId: string, files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'corral-pack-src-'))
  try {
    for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text)
    await mkdir(join(dir, 'out'))
    const file = join(dir, 'out', 'pack.tar.gz')
    await tar({ gzip: true, file, cwd: dir }, Object.keys(files))
    const got = await content.ingest(await readFile(file))
    const pack = await store.packs.create(orgId, {
      name: got.manifest.name, display_name: got.manifest.display_name, version: got.manifest.version, tier: 'community', visibility: 'org',
      image_origin: 'upload', image_digest: got.digest, size_bytes: got.sizeBytes, manifest: got.manifest,
    })
    got.release() // the row is written: the tree is collectable from now on
    return pack.id
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

for (const dialect of testDialects()) {
  describe(`packs in workspaces (${dialect.name})`, () => {
    let rig: ControllerRig | undefined
    let contentRoot: string | undefined
    afterEach(async () => {
      await rig?.close()
      rig = undefined
      if (contentRoot) await rm(contentRoot, { recursive: true, force: true })
    })

    /** A rig whose role attaches an agent pack and a plain pack (pool settings as given). */
    const setup = async (opts: RigOptions = {}) => {
      const store = await dialect.open()
      contentRoot = await mkdtemp(join(tmpdir(), 'corral-pack-content-'))
      const content = new PackContent(join(contentRoot, 'packs'))
      const packs: PackSource = { findVisible: (o, ids) => store.packs.findVisible(o, ids), dir: (d) => content.dir(d), pin: (d) => content.pin(d) }
      // Packs attach before the first fill pass, so pool members start with them.
      const r = (rig = await controllerRig(store, { ...opts, packs, poolSize: undefined }))
      const agentPack = await uploadPack(store, content, r.orgId, { 'pack.yaml': AGENT_YAML, 'agent.mjs': AGENT })
      const notesPack = await uploadPack(store, content, r.orgId, { 'pack.yaml': 'name: notes\nversion: "2"\n', 'notes.txt': 'pack notes' })
      await setRole(r, { pack_ids: JSON.stringify([agentPack, notesPack]), ...(opts.poolSize ? { pool_policy: 'static', pool_size: opts.poolSize } : {}) })
      return { r, agentPack, notesPack, content }
    }
    const setRole = (r: ControllerRig, set: Record<string, unknown>) =>
      r.store.db.updateTable('agent_roles' as never).set(set as never).where('id' as never, '=', r.role.id as never).execute()
    const role = async (r: ControllerRig) => (await r.store.workspaces.role(r.orgId, { id: r.role.id }))!

    it('runs the pack\'s agent in /data with every pack mounted, its env beneath corral\'s; events must satisfy the pack\'s schema', async () => {
      const { r } = await setup()
      const { workspace, task } = await r.controller.createWorkspace(r.orgId, r.actor, await role(r), { description: 'first', options: {} })
      const dataDir = join(r.root, 'runtime', 'workspaces', workspace.id, 'data')
      const report = JSON.parse(await waitFor(() => readFile(join(dataDir, 'report.json'), 'utf8').catch(() => undefined), 'the pack agent report'))
      const packsDir = join(r.root, 'runtime', 'workspaces', workspace.id, 'packs')
      expect(report).toEqual({
        argv: [join(packsDir, 'pack-agent', 'agent.mjs')], cwd: dataDir, packs: 'pack-agent,notes', packs_dir: packsDir,
        pack_dir: join(packsDir, 'pack-agent'), events_url: 'https://corral.internal', greeting: 'hello', workspace_dir: dataDir,
        notes: 'pack notes', task: 'first',
      })

      const claims = { org_id: r.orgId, workspace_id: workspace.id, task_id: task!.id, exp: 0 }
      const post = (body: unknown) => r.events.handle(claims, 'POST', `/task/${task!.id}/event`, Buffer.from(JSON.stringify(body)))
      expect(await post({ type: 'progress_status', iteration: 1 })).toEqual({
        status: 400,
        body: { error: { code: 'validation_error', message: 'the progress_status event does not match the schema of pack pack-agent', details: { fields: { '/percent': "must have required property 'percent'" }, packs: ['pack-agent'] } } },
      })
      // corral's own schema still applies first.
      expect(await post({ type: 'progress_status', iteration: -1, percent: 5 })).toMatchObject({
        status: 400, body: { error: { message: 'the progress_status event does not match its schema', details: { fields: { '/iteration': 'must be >= 0' } } } },
      })
      expect((await post({ type: 'progress_status', iteration: 1, percent: 50 })).status).toBe(202)
      await r.audit.flush()
      const rows = await r.store.audit.page(r.orgId, { filters: [], workspaceId: workspace.id, order: 'asc', limit: 100 })
      // Refused events leave no row (as corral's own schema violations).
      expect(rows.filter((e) => e.event_type === 'progress_status').map((e) => e.detail)).toEqual([{ type: 'progress_status', iteration: 1, percent: 50 }])
    })

    it('a role change applies to the next agent: without the agent pack the default agent runs and the pack\'s schemas no longer apply', async () => {
      const { r, notesPack } = await setup()
      const { workspace, task } = await r.controller.createWorkspace(r.orgId, r.actor, await role(r), { description: 'first', options: {} })
      const dataDir = join(r.root, 'runtime', 'workspaces', workspace.id, 'data')
      await waitFor(async () => (await r.store.workspaces.tasks.get(r.orgId, task!.id))?.status === 'failed' && (await r.store.workspaces.byId(workspace.id))?.state === 'idle', 'first task over')
      await setRole(r, { pack_ids: JSON.stringify([notesPack]) })
      expect(await r.controller.restartIdleForRole(r.orgId, r.role.id)).toBe(1)
      await r.controller.submitTask(r.orgId, r.actor, workspace.id, { description: 'write out.txt by the stand-in', options: {} })
      await waitFor(() => readFile(join(dataDir, 'out.txt'), 'utf8').catch(() => undefined), 'the default agent ran')
      expect(await readFile(join(dataDir, 'tasks.log'), 'utf8')).toContain('write out.txt')
      // The pack agent's schemas no longer apply to this workspace's events.
      const second = (await r.store.workspaces.tasks.forWorkspace(r.orgId, workspace.id)).at(-1)!
      const claims = { org_id: r.orgId, workspace_id: workspace.id, task_id: second.id, exp: 0 }
      expect((await r.events.handle(claims, 'POST', `/task/${second.id}/event`, Buffer.from('{"type":"progress_status"}'))).status).toBe(202)
    })

    it('a warm pool member runs the pack\'s agent ahead of its task; its trees are pinned until it exits', async () => {
      const { r, agentPack, content } = await setup({ poolSize: 1 })
      await r.controller.fillPools()
      const [member] = await waitFor(async () => {
        const m = (await r.store.workspaces.list(r.orgId, {})).filter((w) => w.pooled && w.state === 'idle')
        return m.length === 1 && m
      }, 'an idle pool member')
      const warm = JSON.parse(await waitFor(() => readFile(join(r.root, 'runtime', 'workspaces', member!.id, 'data', 'warm.json'), 'utf8').catch(() => undefined), 'the warm pack agent'))
      expect(warm).toMatchObject({ packs: 'pack-agent,notes', greeting: 'hello', notes: 'pack notes' })
      expect(warm.argv[0]).toMatch(/\/packs\/pack-agent\/agent\.mjs$/)
      expect(existsSync(join(r.root, 'runtime', 'workspaces', member!.id, 'data', 'report.json'))).toBe(false)

      // A collection (as after a re-upload) leaves the running agent's tree alone, then takes it.
      const digest = (await r.store.packs.get(r.orgId, agentPack))!.image_digest!
      expect(await content.removeIfUnused(digest, async () => false)).toBe(false)
      expect(existsSync(content.dir(digest))).toBe(true)
      await r.runtime.stopAgent(member!.id)
      await waitFor(async () => content.removeIfUnused(digest, async () => false), 'the pin released at exit')
      expect(existsSync(content.dir(digest))).toBe(false)
    })
  })
}
