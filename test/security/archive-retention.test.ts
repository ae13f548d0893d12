// An archived workspace keeps no storage where workspaces run (docs/workspaces.md "Archive
// retention", docs/kubernetes.md "Runtime: storage retention"): once its stop snapshot holds all
// of /data, the directory (local drivers) or the PersistentVolumeClaim (Kubernetes) is released,
// its snapshots stay, and a task after unarchive finds /data restored from them. Through the
// lifecycle on both dialects with the process driver, and on the Kubernetes driver against the
// fake API server.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { kubernetesSettingsFromEnv } from '../../src/runtime/index.js'
import { claimName, openKubeClient } from '../../src/runtime/kubernetes/index.js'
import { DEFAULT_LIMITS } from '../../src/runtime/limits.js'
import { testDialects } from '../helpers/dialects.js'
import { FakeKube } from '../helpers/fake-kube/index.js'
import { kubernetesRuntime, type KubernetesRuntimeUnderTest } from '../runtime/drivers.js'
import { controllerRig, waitFor, type ControllerRig } from '../workspaces/harness.js'

for (const dialect of testDialects()) {
  describe(`archiving releases /data, keeps the snapshots (${dialect.name}, process driver)`, () => {
    let rig: ControllerRig | undefined
    afterEach(async () => {
      await rig?.close()
      rig = undefined
    })

    it('archive: the data directory is gone, the snapshots stay; a task after unarchive finds /data restored', async () => {
      const r = (rig = await controllerRig(await dialect.open()))
      const ws = (id: string) => r.store.workspaces.byId(id)
      const { workspace, task } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'wait out.txt kept', options: {} })
      await waitFor(async () => (await ws(workspace.id))?.state === 'busy', 'busy')
      const reply = await r.events.handle({ org_id: r.orgId, workspace_id: workspace.id, task_id: task!.id, exp: 0 }, 'POST', `/task/${task!.id}/event`,
        Buffer.from(JSON.stringify({ type: 'task_end', status: 'completed', summary: 'done' })))
      expect(reply.status).toBe(202)
      const dataDir = join(r.root, 'runtime', 'workspaces', workspace.id, 'data')
      writeFileSync(join(dataDir, 'go'), '')
      await waitFor(async () => { const w = await ws(workspace.id); return w?.state === 'idle' && w.task_count === 1 }, 'idle after the task')
      expect(readFileSync(join(dataDir, 'out.txt'), 'utf8')).toBe('kept')

      await r.controller.archive(r.orgId, workspace.id, 'usr_test')
      expect((await ws(workspace.id))!.state).toBe('archived')
      expect(existsSync(dataDir)).toBe(false)
      expect((await r.runtime.status(workspace.id)).phase).toBe('absent')
      const snapshots = await r.runtime.snapshots(workspace.id)
      expect(snapshots.at(-1)?.reason).toBe('stop')
      expect((await r.controller.snapshotFiles(r.orgId, workspace.id)).map((f) => f.path)).toContain('out.txt')

      await r.controller.unarchive(r.orgId, workspace.id, 'usr_test')
      const next = await r.controller.submitTask(r.orgId, r.actor, workspace.id, { description: 'write second.txt more', options: {} })
      await waitFor(async () => existsSync(join(dataDir, 'second.txt')), 'the follow-up ran')
      expect(readFileSync(join(dataDir, 'out.txt'), 'utf8')).toBe('kept')
      expect(readFileSync(join(dataDir, 'tasks.log'), 'utf8')).toContain(next.id)
    })

    it('a workspace stopped before its archive is released as well; one whose stop snapshot failed keeps /data', async () => {
      const r = (rig = await controllerRig(await dialect.open()))
      const ws = (id: string) => r.store.workspaces.byId(id)
      const { workspace } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'sleep', options: {} })
      const dataDir = join(r.root, 'runtime', 'workspaces', workspace.id, 'data')
      await waitFor(async () => existsSync(join(dataDir, 'tasks.log')), 'the agent started')
      await r.controller.stop(r.orgId, workspace.id)
      expect(existsSync(dataDir)).toBe(true) // a stop keeps /data for the restart
      await r.controller.archive(r.orgId, workspace.id, 'usr_test')
      expect(existsSync(dataDir)).toBe(false)

      const { workspace: other } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'sleep', options: {} })
      const otherData = join(r.root, 'runtime', 'workspaces', other.id, 'data')
      await waitFor(async () => existsSync(join(otherData, 'tasks.log')), 'the second agent started')
      // The stop snapshot fails (its archive cannot be written): /data is then all there is.
      rmSync(join(r.root, 'runtime', 'workspaces', other.id, 'snapshots'), { recursive: true, force: true })
      writeFileSync(join(r.root, 'runtime', 'workspaces', other.id, 'snapshots'), 'not a directory')
      await r.controller.archive(r.orgId, other.id, 'usr_test')
      expect((await ws(other.id))!.state).toBe('archived')
      expect(existsSync(join(otherData, 'tasks.log'))).toBe(true)
    })
  })
}

describe('archiving releases the PersistentVolumeClaim (kubernetes driver, fake API server)', () => {
  let fake: FakeKube
  let dir: string
  let runtime: KubernetesRuntimeUnderTest

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'corral-k8s-retention-'))
    fake = await FakeKube.start({ root: join(dir, 'kubelet') })
    writeFileSync(join(dir, 'kubeconfig'), fake.kubeconfig())
    fake.store.create('services', 'corral', {
      apiVersion: 'v1', kind: 'Service', metadata: { name: 'corral-proxy' },
      spec: { clusterIP: '127.0.0.1', selector: { 'app.kubernetes.io/name': 'corral' }, ports: [{ name: 'proxy', port: 7071, targetPort: 7071 }] },
    })
    const s = kubernetesSettingsFromEnv({ CORRAL_AGENT_IMAGE: 'corral-agent:test', CORRAL_K8S_KUBECONFIG: join(dir, 'kubeconfig') }, DEFAULT_LIMITS)
    runtime = kubernetesRuntime({ root: join(dir, 'runtime'), proxy: { host: '127.0.0.1', port: 1 }, settings: s, stopGraceMs: 1000, warn: () => {}, client: openKubeClient(s) })
  })

  afterAll(async () => {
    await runtime?.close()
    await fake?.close()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  const claims = (id: string) => fake.store.list('persistentvolumeclaims', 'corral').filter((c) => c.metadata?.name === claimName(id))
  const pods = (id: string) => fake.store.list('pods', 'corral').filter((p) => (p.metadata?.annotations as Record<string, string> | undefined)?.['corral.dev/workspace-id'] === id)

  it('release deletes the claim and the pods, keeps the snapshots; the next provision restores /data into a new claim', async () => {
    const id = 'ws_retention1'
    await runtime.provision({ workspaceId: id, owner: { orgId: 'org_1', roleId: 'role_1' } })
    const staged = mkdtempSync(join(dir, 'staged-'))
    writeFileSync(join(staged, 'notes.md'), 'keep me\n')
    await runtime.placeFiles(id, [], staged, ['notes.md'])
    await runtime.stop(id, 1)
    expect(claims(id)).toHaveLength(1)

    await runtime.release(id)
    expect(claims(id)).toHaveLength(0)
    expect(pods(id)).toHaveLength(0)
    expect((await runtime.status(id)).phase).toBe('absent')
    expect((await runtime.snapshots(id)).map((s) => s.reason)).toEqual(['stop'])

    const again = await runtime.provision({ workspaceId: id, forkFrom: { workspaceId: id, taskCount: 1 } })
    expect(again.restoredFrom?.reason).toBe('stop')
    expect(claims(id)).toHaveLength(1)
    expect(readFileSync(join(fake.kubelet.claimDir(claimName(id)), 'notes.md'), 'utf8')).toBe('keep me\n')
  })

  it('remove deletes the claim, the pods and the snapshots', async () => {
    const id = 'ws_retention2'
    await runtime.provision({ workspaceId: id })
    await runtime.stop(id, 0)
    await runtime.remove(id)
    expect(claims(id)).toHaveLength(0)
    expect(pods(id)).toHaveLength(0)
    expect(await runtime.snapshots(id)).toEqual([])
  })
})
