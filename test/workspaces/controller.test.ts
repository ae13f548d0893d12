// WorkspaceController on a real store (SQLite, and Postgres when CORRAL_TEST_PG_URL is set) with
// the real `process` runtime and a stand-in agent: provisioning, the task cycle with its snapshot,
// agent events, cancel, timeout, agent crash, stop/archive/unarchive, fork, follow-up refusals and
// the reconcile after a crash of serve.
import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { AuditEvent } from '../../src/contract/index.js'
import { testDialects } from '../helpers/dialects.js'
import { controllerRig, handTask, waitFor, warmClaims, type ControllerRig } from './harness.js'

for (const dialect of testDialects()) {
  describe(`WorkspaceController (${dialect.name})`, () => {
    let rig: ControllerRig | undefined
    afterEach(async () => {
      await rig?.close()
      rig = undefined
    })

    const setup = async (opts?: Parameters<typeof controllerRig>[1]) => (rig = await controllerRig(await dialect.open(), opts))
    const events = async (r: ControllerRig, workspaceId: string): Promise<AuditEvent[]> => {
      await r.audit.flush()
      return r.store.audit.page(r.orgId, { filters: [], workspaceId, order: 'asc', limit: 1000 })
    }
    const types = async (r: ControllerRig, workspaceId: string) => (await events(r, workspaceId)).map((e) => e.event_type)
    const task = (r: ControllerRig, id: string) => r.store.workspaces.tasks.byId(id)
    const ws = (r: ControllerRig, id: string) => r.store.workspaces.byId(id)
    const settled = (r: ControllerRig, id: string, status: string) => waitFor(async () => (await task(r, id))?.status === status && task(r, id), `task ${status}`)
    const state = (r: ControllerRig, id: string, s: string) => waitFor(async () => (await ws(r, id))?.state === s && ws(r, id), `workspace ${s}`)
    const dataDir = async (r: ControllerRig, id: string) => (await r.runtime.provision({ workspaceId: id })).dataDir
    /** What the warm stand-in's GET /tasks/next would do through the proxy: fetch the task, drop it in task.json. */
    const deliver = async (r: ControllerRig, id: string) => {
      const reply = await r.events.handle(await warmClaims(r, await dataDir(r, id)), 'GET', '/tasks/next', Buffer.alloc(0))
      expect(reply.status).toBe(200)
      handTask(await dataDir(r, id), reply.body)
      return reply.body as { id: string; description: string; proxy_token?: string }
    }

    it('runs a task: provisioning → idle → busy; task_end completes it; the exit snapshots /data and goes idle', async () => {
      const r = await setup()
      const { workspace, task: t } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'wait out.txt hello', options: {} })
      expect(workspace.state).toBe('provisioning')
      expect(t!.status).toBe('submitted')
      await state(r, workspace.id, 'busy')
      expect((await task(r, t!.id))!.status).toBe('running')

      const reply = await r.events.handle({ org_id: r.orgId, workspace_id: workspace.id, task_id: t!.id, exp: 0 }, 'POST', `/task/${t!.id}/event`,
        Buffer.from(JSON.stringify({ type: 'task_end', status: 'completed', summary: 'wrote it' })))
      expect(reply.status).toBe(202)
      const done = await settled(r, t!.id, 'completed')
      expect(done.summary).toBe('wrote it')

      const dataDir = join(r.root, 'runtime', 'workspaces', workspace.id, 'data')
      writeFileSync(join(dataDir, 'go'), '')
      const idle = await waitFor(async () => { const w = await ws(r, workspace.id); return w?.state === 'idle' && w.task_count === 1 && w }, 'idle after the task')
      expect(idle.task_count).toBe(1)
      const files = await r.controller.snapshotFiles(r.orgId, workspace.id)
      expect(files.map((f) => f.path)).toEqual(expect.arrayContaining(['out.txt', 'tasks.log']))

      const all = await events(r, workspace.id)
      expect(all.map((e) => e.event_type)).toEqual(['workspace_created', 'task_submitted', 'workspace_provisioned', 'task_end', 'task_completed'])
      expect(all[0]).toMatchObject({ actor: 'control-plane', category: 'activity', agent_role: 'coder', agent_provider: 'anthropic', user_id: 'usr_test', detail: { forked: false } })
      expect(all[1]).toMatchObject({ task_id: t!.id, detail: { description: 'wait out.txt hello' } })
      expect(all[3]).toMatchObject({ actor: 'agent', category: 'activity', task_id: t!.id, detail: { type: 'task_end', status: 'completed', summary: 'wrote it' } })
      expect(all[4]).toMatchObject({ task_id: t!.id, detail: { status: 'completed' } })
    })

    it('agent callbacks: unknown type and malformed JSON are refused, a token for another task is refused', async () => {
      const r = await setup()
      const { workspace, task: t } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'sleep', options: {} })
      const claims = { org_id: r.orgId, workspace_id: workspace.id, task_id: t!.id, exp: 0 }
      const post = (body: string, path = `/task/${t!.id}/event`, c = claims) => r.events.handle(c, 'POST', path, Buffer.from(body))
      expect((await post(JSON.stringify({ type: 'made_up' }))).status).toBe(400)
      expect((await post('{nope')).status).toBe(400)
      expect((await post(JSON.stringify({ type: 'tool_call' }), '/task/task_other/event')).status).toBe(403)
      expect((await post(JSON.stringify({ type: 'tool_call' }), `/task/${t!.id}/event`, { ...claims, workspace_id: 'ws_elsewhere' })).status).toBe(404)
      // Not a warm agent: GET /tasks/next has no more work for it.
      expect(await r.events.handle(claims, 'GET', '/tasks/next', Buffer.alloc(0))).toMatchObject({ status: 410, body: { error: { code: 'no_more_tasks' } } })
      // Each type's schema (agent-event-schemas.ts): the fields corral relies on are checked.
      expect(await post(JSON.stringify({ type: 'task_end', status: 'done' }))).toMatchObject({ status: 400, body: { error: { code: 'validation_error', details: { fields: { '/status': expect.any(String) } } } } })
      expect(await post(JSON.stringify({ type: 'tool_call' }))).toMatchObject({ status: 400, body: { error: { details: { fields: { '/tool': expect.any(String) } } } } })
      expect((await post(JSON.stringify({ type: 'iteration_start', iteration: -1 }))).status).toBe(400)
      // A budget deny from the proxy's charge is passed on and nothing is recorded.
      const status = Buffer.from(JSON.stringify({ type: 'current_status', text: 'thinking' }))
      const denied = await r.events.handle(claims, 'POST', `/task/${t!.id}/event`, status,
        async () => ({ ok: false, status: 429, reason: 'budget_exhausted', detail: { counter: 'requests', scope: 'workspace' } }))
      expect(denied).toMatchObject({ status: 429, body: { error: { code: 'budget_exhausted', details: { counter: 'requests' } } } })
      const charged = await r.events.handle(claims, 'POST', `/task/${t!.id}/event`, status,
        async () => ({ ok: true, debits: { requests: 1 }, budget_state: { requests: { workspace: { used: 1, max: 0 } } } }))
      expect(charged.status).toBe(202)
      const rows = (await events(r, workspace.id)).filter((e) => e.event_type === 'current_status')
      expect(rows).toHaveLength(1)
      expect(rows[0]).toMatchObject({ debits: { requests: 1 }, detail: { type: 'current_status', text: 'thinking' } })
      await state(r, workspace.id, 'busy')
      await r.controller.stop(r.orgId, workspace.id)
    })

    it('an agent that exits without task_end fails its task (agent_exited); the workspace stays usable', async () => {
      const r = await setup()
      const { workspace, task: t } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'crash', options: {} })
      const failed = await settled(r, t!.id, 'failed')
      expect(failed.reason).toBe('agent_exited')
      await waitFor(async () => (await ws(r, workspace.id))?.state === 'idle', 'idle')
      const next = await r.controller.submitTask(r.orgId, r.actor, workspace.id, { description: 'write b.txt two', options: {} })
      await settled(r, next.id, 'failed') // the stand-in never reports task_end
      const w = await waitFor(async () => { const x = await ws(r, workspace.id); return x?.task_count === 2 && x }, 'two tasks counted')
      expect(w.state === 'idle' || w.state === 'busy').toBe(true)
    })

    it('cancel: a running task is cancelled and its agent stopped; a follow-up while busy is task_already_running', async () => {
      const r = await setup()
      const { workspace, task: t } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'sleep', options: {} })
      await state(r, workspace.id, 'busy')
      await expect(r.controller.submitTask(r.orgId, r.actor, workspace.id, { description: 'more', options: {} })).rejects.toMatchObject({ code: 'task_already_running' })
      const cancelled = await r.controller.cancelTask(r.orgId, t!.id)
      expect(cancelled).toMatchObject({ status: 'cancelled', reason: 'cancelled_by_user' })
      await state(r, workspace.id, 'idle')
      const all = await events(r, workspace.id)
      expect(all.filter((e) => e.event_type === 'task_completed').map((e) => e.detail)).toEqual([{ status: 'cancelled', reason: 'cancelled_by_user' }])
    })

    it('task_timeout_seconds fails the task with reason timeout', async () => {
      const r = await setup({ taskTimeoutSeconds: 1 })
      const { task: t } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'sleep', options: {} })
      const failed = await settled(r, t!.id, 'failed')
      expect(failed.reason).toBe('timeout')
    })

    it('idle_timeout_seconds stops an idle workspace with a snapshot', async () => {
      const r = await setup({ idleTimeoutSeconds: 1 })
      const { workspace } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'crash', options: {} })
      const stopped = await state(r, workspace.id, 'stopped')
      expect(stopped.desired_state).toBe('stopped')
      expect(await types(r, workspace.id)).toContain('workspace_stopped')
    })

    it('stop, already stopped, follow-up restarts it; archive refuses follow-ups; unarchive lands in stopped', async () => {
      const r = await setup()
      const { workspace, task: t } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'sleep', options: {} })
      await state(r, workspace.id, 'busy')
      await waitFor(async () => existsSync(join(r.root, 'runtime', 'workspaces', workspace.id, 'data', 'tasks.log')), 'the agent started')
      const stopped = await r.controller.stop(r.orgId, workspace.id)
      expect(stopped).toMatchObject({ state: 'stopped', task_count: 1 })
      expect(await task(r, t!.id)).toMatchObject({ status: 'cancelled', reason: 'workspace_stopped' })
      await expect(r.controller.stop(r.orgId, workspace.id)).rejects.toMatchObject({ code: 'workspace_already_stopped' })
      expect((await r.controller.snapshotFiles(r.orgId, workspace.id)).map((f) => f.path)).toContain('tasks.log')

      const again = await r.controller.submitTask(r.orgId, r.actor, workspace.id, { description: 'crash', options: {} })
      await settled(r, again.id, 'failed')
      await state(r, workspace.id, 'idle')

      await r.controller.archive(r.orgId, workspace.id, 'usr_test')
      expect((await ws(r, workspace.id))!.state).toBe('archived')
      await expect(r.controller.submitTask(r.orgId, r.actor, workspace.id, { description: 'x', options: {} })).rejects.toMatchObject({ code: 'workspace_archived' })
      await expect(r.controller.stop(r.orgId, workspace.id)).rejects.toMatchObject({ code: 'workspace_already_stopped' })
      expect((await r.controller.unarchive(r.orgId, workspace.id, 'usr_test')).state).toBe('stopped')
      await expect(r.controller.unarchive(r.orgId, workspace.id, 'usr_test')).rejects.toMatchObject({ code: 'not_archived' })
      const seen = await types(r, workspace.id)
      expect(seen).toEqual(expect.arrayContaining(['workspace_stopped', 'workspace_archived', 'workspace_unarchived']))
      expect(seen.filter((x) => x === 'workspace_stopped')).toHaveLength(2)
    })

    it('fork: busy parent is invalid_state; a fork at 1 restores the snapshot after one task; at 0 starts empty', async () => {
      const r = await setup()
      const { workspace: parent } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'wait one.txt first', options: {} })
      await state(r, parent.id, 'busy')
      await expect(r.controller.fork(r.orgId, r.actor, parent.id, 0, r.role)).rejects.toMatchObject({ code: 'invalid_state' })
      writeFileSync(join(r.root, 'runtime', 'workspaces', parent.id, 'data', 'go'), '')
      await waitFor(async () => { const w = await ws(r, parent.id); return w?.state === 'idle' && w.task_count === 1 }, 'parent idle after one task')
      await expect(r.controller.fork(r.orgId, r.actor, parent.id, 2, r.role)).rejects.toMatchObject({ code: 'validation_error' })

      const forker = { userId: 'usr_other', creatorId: 'key_other' }
      const child = await r.controller.fork(r.orgId, forker, parent.id, 1, r.role)
      expect(child).toMatchObject({ state: 'provisioning', parent_workspace_id: parent.id, fork_point_task_count: 1, created_by: 'key_other' })
      await state(r, child.id, 'idle')
      expect(existsSync(join(r.root, 'runtime', 'workspaces', child.id, 'data', 'one.txt'))).toBe(true)

      const empty = await r.controller.fork(r.orgId, forker, parent.id, 0, r.role)
      await state(r, empty.id, 'idle')
      expect(existsSync(join(r.root, 'runtime', 'workspaces', empty.id, 'data', 'one.txt'))).toBe(false)

      const parentEvents = await events(r, parent.id)
      const forked = parentEvents.find((e) => e.event_type === 'workspace_forked')!
      expect(forked).toMatchObject({ category: 'audit', user_id: 'usr_other', detail: { resource_id: parent.id, child_workspace_id: child.id, fork_point_task_count: 1 } })
      expect(String(forked.detail!.fork_source_snapshot_ref)).toContain(parent.id)
      const childEvents = await events(r, child.id)
      expect(childEvents.map((e) => e.event_type)).toEqual(['workspace_fork_created', 'workspace_created', 'workspace_provisioned'])
      expect(childEvents[1]!.detail).toMatchObject({ forked: true, parent_workspace_id: parent.id, fork_point_task_count: 1 })
    })

    it('a restarted controller fails the task its dead agent was running and serves the next one', async () => {
      const r = await setup()
      const { workspace, task: t } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'sleep', options: {} })
      await state(r, workspace.id, 'busy')
      // serve dies: its agents die with it; the rows still say busy/running.
      await r.controller.close()
      await r.runtime.stopAgent(workspace.id)
      await r.store.workspaces.tasks.create(r.orgId, { workspace_id: workspace.id, description: 'crash', options: {}, created_by: 'usr_test' })
      const second = await r.restart()
      expect(await task(r, t!.id)).toMatchObject({ status: 'failed', reason: 'interrupted' })
      await waitFor(async () => (await r.store.workspaces.tasks.active(workspace.id)) === undefined, 'the queued task ran')
      await state(r, workspace.id, 'idle')
    })

    it('a workspace left in provisioning by a crash is provisioned by the next start', async () => {
      const r = await setup()
      const id = await r.store.workspaces.create(r.orgId, { role_id: r.role.id, created_by: 'usr_test', created_by_user_id: 'usr_test' })
      await r.restart()
      await state(r, id, 'idle')
      expect(await types(r, id)).toEqual(['workspace_provisioned'])
    })

    it('warm pool: keeps pool_size workspaces provisioned; a task claims one (no provisioning) and the pool refills', async () => {
      const r = await setup({ poolSize: 2 })
      const pooled = async () => (await r.store.workspaces.list(r.orgId, { state: ['idle'] })).filter((w) => w.pooled)
      const ready = await waitFor(async () => { const p = await pooled(); return p.length === 2 && p }, 'two pooled idle workspaces')
      expect(ready.every((w) => w.created_by === 'system')).toBe(true)
      for (const w of ready) { const d = await dataDir(r, w.id); await waitFor(async () => existsSync(join(d, 'warm.pid')), 'warm agents waiting') }
      expect(await r.controller.activeCount(r.orgId, [r.role.id])).toBe(0) // pool members do not block a provider archive
      await expect(r.controller.submitTask(r.orgId, r.actor, ready[0]!.id, { description: 'x', options: {} })).rejects.toMatchObject({ code: 'workspace_not_ready' })

      const { workspace, task: t } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'crash', options: {} })
      expect(ready.map((w) => w.id)).toContain(workspace.id)
      expect(workspace).toMatchObject({ state: 'idle', pooled: false, created_by: 'usr_test' })
      await deliver(r, workspace.id)
      await settled(r, t!.id, 'failed')
      await waitFor(async () => (await pooled()).length === 2, 'the pool refilled')
      const seen = await events(r, workspace.id)
      expect(seen.map((e) => [e.event_type, e.user_id])).toEqual(expect.arrayContaining([['workspace_created', 'system'], ['task_submitted', 'usr_test']]))
      expect(seen.filter((e) => e.event_type === 'workspace_created')).toHaveLength(1)
    })

    it('warm pool: the member\'s agent runs ahead of its task; a claim hands the task over to that same process', async () => {
      const r = await setup({ poolSize: 1 })
      const member = await waitFor(async () => (await r.store.workspaces.list(r.orgId, { state: ['idle'] })).find((w) => w.pooled), 'a pooled idle workspace')
      const dir = await dataDir(r, member.id)
      await waitFor(async () => existsSync(join(dir, 'warm.pid')), 'the warm agent waiting')
      const pid = (await r.runtime.status(member.id)).pid
      expect(pid).toBeGreaterThan(0)
      // Unclaimed: a long poll ends with 'wait' (the handler answers 204, Retry-After 0).
      expect(await r.controller.nextTask(member.id, 20)).toBe('wait')

      const startup = await warmClaims(r, dir)
      const polling = r.events.handle(startup, 'GET', '/tasks/next', Buffer.alloc(0))
      const { workspace, task: t } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'write out.txt warm hello', options: {} })
      expect(workspace.id).toBe(member.id)
      const reply = await polling
      expect(reply).toMatchObject({ status: 200, body: { id: t!.id, description: 'write out.txt warm hello', proxy_token: expect.any(String) } })
      // The task's own token: attributed to and budgeted on this task.
      const check = await r.tokens.check(`Bearer ${(reply.body as { proxy_token: string }).proxy_token}`)
      expect(check).toMatchObject({ ok: true, claims: { workspace_id: member.id, task_id: t!.id } })
      expect((await r.runtime.status(member.id)).pid).toBe(pid) // no process start
      await state(r, member.id, 'busy')
      // Delivered once: the agent's next poll (after its task) is told there is no more work.
      expect((await r.events.handle(startup, 'GET', '/tasks/next', Buffer.alloc(0))).status).toBe(410)

      await r.events.handle({ org_id: r.orgId, workspace_id: member.id, task_id: t!.id, exp: 0 }, 'POST', `/task/${t!.id}/event`,
        Buffer.from(JSON.stringify({ type: 'task_end', status: 'completed', summary: 'warm' })))
      handTask(dir, reply.body)
      await settled(r, t!.id, 'completed')
      await waitFor(async () => { const w = await ws(r, member.id); return w?.state === 'idle' && w.task_count === 1 }, 'idle after the warm task')
      expect(existsSync(join(dir, 'out.txt'))).toBe(true)
    })

    it('warm pool: an agent that asks for its task before its warm-up is registered waits instead of being told there is none', async () => {
      const r = await setup({ poolSize: 1 })
      const member = await waitFor(async () => (await r.store.workspaces.list(r.orgId, { state: ['idle'] })).find((w) => w.pooled), 'a pooled idle workspace')
      await waitFor(async () => (await r.runtime.status(member.id)).phase === 'running', 'the warm agent spawned')
      // serve's event loop is busy (as on a loaded machine) while the agent comes up and asks: the
      // runtime's "spawned" report, and so the controller's registration, is not processed yet.
      const pidFile = join(await dataDir(r, member.id), 'warm.pid')
      const until = Date.now() + 15_000
      while (!existsSync(pidFile) && Date.now() < until) { /* the loop stays blocked */ }
      expect(existsSync(pidFile)).toBe(true)
      expect(await r.controller.nextTask(member.id, 20)).toBe('wait')
    })

    it('WorkspaceControl: activeCount and stopForRole', async () => {
      const r = await setup()
      const { workspace } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'sleep', options: {} })
      await state(r, workspace.id, 'busy')
      expect(await r.controller.activeCount(r.orgId, [r.role.id])).toBe(1)
      expect(await r.controller.activeCount('org_other', [r.role.id])).toBe(0)
      expect(await r.controller.stopForRole(r.orgId, r.role.id)).toBe(1)
      await state(r, workspace.id, 'stopped')
      expect(await r.controller.activeCount(r.orgId, [r.role.id])).toBe(0)
      expect(await r.controller.stopForRole(r.orgId, r.role.id)).toBe(0)
    })

    it('WorkspaceControl: restartIdleForRole records workspace_restarted for idle workspaces only', async () => {
      const r = await setup()
      const { workspace: idle } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'crash', options: {} })
      await waitFor(async () => { const w = await ws(r, idle.id); return w?.state === 'idle' && w.task_count === 1 }, 'idle after a task')
      const { workspace: busy } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'sleep', options: {} })
      await state(r, busy.id, 'busy')
      expect(await r.controller.restartIdleForRole(r.orgId, r.role.id)).toBe(1)
      expect(await types(r, idle.id)).toContain('workspace_restarted')
      expect(await types(r, busy.id)).not.toContain('workspace_restarted')
      await r.controller.stop(r.orgId, busy.id)
    })
  })
}
