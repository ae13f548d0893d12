// The warm claim's token hand-over ahead of the task (`GET /tasks/next?token=ahead`): the claim
// gives the waiting agent the task's own token first, then the task with that same token; an
// agent that does not ask for it gets the task with its token in one answer, as before.
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { testDialects } from '../helpers/dialects.js'
import { controllerRig, handTask, waitFor, warmClaims, type ControllerRig } from './harness.js'

const ahead = new URLSearchParams('token=ahead')

for (const dialect of testDialects()) {
  describe(`warm claim: task token ahead of the task (${dialect.name})`, () => {
    let rig: ControllerRig | undefined
    afterEach(async () => {
      await rig?.close()
      rig = undefined
    })

    const waitingMember = async (r: ControllerRig) => {
      const member = await waitFor(async () => (await r.store.workspaces.list(r.orgId, { state: ['idle'] })).find((w) => w.pooled), 'a pooled idle workspace')
      const dir = (await r.runtime.provision({ workspaceId: member.id })).dataDir
      await waitFor(async () => existsSync(join(dir, 'warm.pid')), 'the warm agent waiting')
      return { member, dir }
    }

    it('a claim answers the waiting poll with the task\'s token; the next poll gets the task with the same token', async () => {
      const r = (rig = await controllerRig(await dialect.open(), { poolSize: 1 }))
      const { member, dir } = await waitingMember(r)
      const workspaceClaims = await warmClaims(r, dir)
      // Unclaimed, asking for the token ahead changes nothing: the long poll ends with 204.
      expect(await r.controller.nextTask(member.id, 20, { tokenAhead: true })).toBe('wait')

      const polling = r.events.handle(workspaceClaims, 'GET', '/tasks/next', Buffer.alloc(0), undefined, ahead)
      const { workspace, task: t } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'write out.txt ahead', options: {} })
      expect(workspace.id).toBe(member.id)
      const first = await polling
      expect(first).toMatchObject({ status: 200, body: { proxy_token: expect.any(String) } })
      expect(first.body).not.toHaveProperty('id')
      const token = (first.body as { proxy_token: string }).proxy_token
      expect(await r.tokens.check(`Bearer ${token}`)).toMatchObject({ ok: true, claims: { workspace_id: member.id, task_id: t!.id } })

      // The agent asks again, now with the task's token: it gets the task, carrying that token.
      const taskClaims = { org_id: r.orgId, workspace_id: member.id, exp: 0, task_id: t!.id }
      const second = await r.events.handle(taskClaims, 'GET', '/tasks/next', Buffer.alloc(0), undefined, ahead)
      expect(second).toMatchObject({ status: 200, body: { id: t!.id, description: 'write out.txt ahead', proxy_token: token } })
      await waitFor(async () => (await r.store.workspaces.byId(member.id))?.state === 'busy', 'busy')
      expect((await r.events.handle(taskClaims, 'GET', '/tasks/next', Buffer.alloc(0), undefined, ahead)).status).toBe(410)

      await r.events.handle(taskClaims, 'POST', `/task/${t!.id}/event`, Buffer.from(JSON.stringify({ type: 'task_end', status: 'completed', summary: 'ahead' })))
      handTask(dir, second.body)
      await waitFor(async () => (await r.store.workspaces.tasks.byId(t!.id))?.status === 'completed', 'the task completed')
      await waitFor(async () => { const w = await r.store.workspaces.byId(member.id); return w?.state === 'idle' && w.task_count === 1 }, 'idle after the task')
    })

    it('a poll without token=ahead is not woken by the token: it gets the task with its token', async () => {
      const r = (rig = await controllerRig(await dialect.open(), { poolSize: 1 }))
      const { member, dir } = await waitingMember(r)
      const polling = r.events.handle(await warmClaims(r, dir), 'GET', '/tasks/next', Buffer.alloc(0))
      const { task: t } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'write out.txt plain', options: {} })
      const reply = await polling
      expect(reply).toMatchObject({ status: 200, body: { id: t!.id, proxy_token: expect.any(String) } })
      expect(await r.tokens.check(`Bearer ${(reply.body as { proxy_token: string }).proxy_token}`)).toMatchObject({ ok: true, claims: { task_id: t!.id } })
      await r.events.handle({ org_id: r.orgId, workspace_id: member.id, task_id: t!.id, exp: 0 }, 'POST', `/task/${t!.id}/event`,
        Buffer.from(JSON.stringify({ type: 'task_end', status: 'completed', summary: 'plain' })))
      handTask(dir, reply.body)
      await waitFor(async () => (await r.store.workspaces.tasks.byId(t!.id))?.status === 'completed', 'the task completed')
    })
  })
}
