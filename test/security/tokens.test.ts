// Issue 15 class 6: every kind of token an agent can hold, and every budget through each
// (docs/security.md "Tokens with the narrowest scope"). Observed before: a warm pool member's
// start-up token (no task) went through the proxy after the task budget was spent, since task
// budgets only apply to a token that names a task. Real proxy, real sockets, real policy
// (test/proxy/budget-caps.yaml: `calls` has workspace max 5, task max 2 on GET /count/*).
import { randomBytes } from 'node:crypto'
import { readFileSync, existsSync } from 'node:fs'
import { join } from 'node:path'
import { SignJWT } from 'jose'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { AgentCallbackHandler, AuditEvent } from '../../src/contract/index.js'
import { TASK_ENDED_CHANNEL } from '../../src/store/index.js'
import { loadTokenKey } from '../../src/secrets/index.js'
import { controllerRig, handTask, waitFor, warmClaims, type ControllerRig } from '../workspaces/harness.js'
import { testDialects } from '../helpers/dialects.js'
import { startHarness, type Harness } from '../proxy/harness.js'

const CAPS = readFileSync(new URL('../proxy/budget-caps.yaml', import.meta.url), 'utf8')

describe('tokens through the proxy: each kind, each budget', () => {
  let h: Harness
  let before = 0
  const polls: string[] = []
  const url = (p = 'x'): string => `https://127.0.0.1:${h.up.httpsPort}/count/${p}`
  const rows = async (n: number): Promise<AuditEvent[]> => (await h.audit.waitForDecisions(before + n)).slice(before)
  const startup = async (workspaceId: string): Promise<string> => (await h.proxy.tokens.mint({ org_id: h.orgId, workspace_id: workspaceId }, 600, { startup: true })).token
  const get = async (token: string, p?: string): Promise<number> => (await h.fetch(url(p), { token })).status

  beforeAll(async () => {
    const handler: AgentCallbackHandler = {
      async handle(_claims, method, path) {
        polls.push(`${method} ${path}`)
        return { status: 204 }
      },
    }
    h = await startHarness({ agentCallbacks: () => handler })
  })
  afterAll(async () => h.close())
  beforeEach(() => {
    before = h.audit.decisions().length
    polls.length = 0
  })

  it('a start-up token reaches nothing outbound, also once the task budget is spent; each try has its deny row', async () => {
    const ws = await h.workspace(CAPS)
    const task = await h.token(ws.workspaceId, { task: await h.task(ws.workspaceId) })
    expect([await get(task), await get(task), await get(task)]).toEqual([200, 200, 429])
    const boot = await startup(ws.workspaceId)
    expect(await get(boot)).not.toBe(200)
    const got = await rows(4)
    expect(got[2]).toMatchObject({ decision: 'deny', reason: 'budget_exhausted', detail: { scope: 'task' } })
    expect(got[3]).toMatchObject({ decision: 'deny', reason: 'invalid_token', workspace_id: ws.workspaceId, detail: { token: 'startup' } })
    expect(got[3]!.task_id).toBeUndefined()
  })

  it('a start-up token reaches the task poll only: events and other control paths are denied with a row', async () => {
    const ws = await h.workspace(CAPS)
    const boot = await startup(ws.workspaceId)
    expect((await h.fetch('https://corral.internal/tasks/next', { token: boot })).status).toBe(204)
    expect(polls).toEqual(['GET /tasks/next'])
    const event = await h.fetch('https://corral.internal/task/task_x/event', { token: boot, method: 'POST', body: '{"type":"task_start"}' })
    expect(event.headers.get('x-corral-deny-reason')).toBe('invalid_token')
    const post = await h.fetch('https://corral.internal/tasks/next', { token: boot, method: 'POST', body: '{}' })
    expect(post.headers.get('x-corral-deny-reason')).toBe('invalid_token')
    expect(polls).toEqual(['GET /tasks/next'])
    expect((await rows(2)).map((r) => [r.reason, r.destination, (r.detail as { token?: string }).token])).toEqual([
      ['invalid_token', 'corral.internal', 'startup'], ['invalid_token', 'corral.internal', 'startup'],
    ])
  })

  it('a task token stops at its task\'s end; a token naming a task that does not exist never works', async () => {
    const ws = await h.workspace(CAPS)
    const taskId = await h.task(ws.workspaceId)
    const token = await h.token(ws.workspaceId, { task: taskId })
    expect(await get(token)).toBe(200)
    await h.store.workspaces.tasks.finish(taskId, 'completed')
    await h.store.notify(TASK_ENDED_CHANNEL, `${ws.workspaceId}/${taskId}`)
    expect(await get(token)).not.toBe(200)
    const invented = await h.token(ws.workspaceId, { task: 'task_invented' })
    expect(await get(invented)).not.toBe(200)
    const got = await rows(3)
    expect(got.slice(1).map((r) => [r.reason, (r.detail as { token?: string }).token])).toEqual([['invalid_token', 'task_ended'], ['invalid_token', 'task_ended']])
  })

  it('an expired token is refused, and its row names the token\'s workspace', async () => {
    const ws = await h.workspace(CAPS)
    const key = await loadTokenKey(h.store.settings)
    const past = Math.floor(Date.now() / 1000) - 60
    const expired = await new SignJWT({ org: h.orgId, ws: ws.workspaceId, task: await h.task(ws.workspaceId) })
      .setProtectedHeader({ alg: 'HS256', typ: 'corral-cap+jwt' }).setIssuer('corral').setAudience('corral-proxy')
      .setIssuedAt(past - 600).setExpirationTime(past).sign(key)
    expect(await get(expired)).not.toBe(200)
    expect((await rows(1))[0]).toMatchObject({ reason: 'invalid_token', detail: { expired: true, token_workspace_id: ws.workspaceId } })
  })

  it('another workspace\'s token is charged to that workspace and task, whose ceilings hold', async () => {
    const mine = await h.workspace(CAPS)
    const theirs = await h.workspace(CAPS)
    const stolen = await h.token(theirs.workspaceId, { task: await h.task(theirs.workspaceId) })
    expect([await get(stolen), await get(stolen), await get(stolen)]).toEqual([200, 200, 429])
    const got = await rows(3)
    for (const r of got) expect(r.workspace_id).toBe(theirs.workspaceId)
    // Mine is untouched: my own task token still has its 2.
    const own = await h.token(mine.workspaceId, { task: await h.task(mine.workspaceId) })
    expect([await get(own), await get(own), await get(own)]).toEqual([200, 200, 429])
  })

  it('the workspace ceiling holds across the tokens of several tasks', async () => {
    const ws = await h.workspace(CAPS)
    const statuses: number[] = []
    for (let t = 0; t < 3; t++) {
      const token = await h.token(ws.workspaceId, { task: await h.task(ws.workspaceId) })
      statuses.push(await get(token), await get(token))
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429])
    expect((await rows(6))[5]).toMatchObject({ reason: 'budget_exhausted', detail: { scope: 'workspace' } })
  })

  it('a token whose `use` this version does not know is refused, never widened', async () => {
    const ws = await h.workspace(CAPS)
    const key = await loadTokenKey(h.store.settings)
    const odd = await new SignJWT({ org: h.orgId, ws: ws.workspaceId, use: 'admin', jti: randomBytes(8).toString('hex') })
      .setProtectedHeader({ alg: 'HS256' }).setIssuer('corral').setAudience('corral-proxy').setIssuedAt().setExpirationTime('10m').sign(key)
    expect(await get(odd)).not.toBe(200)
    expect((await rows(1))[0]).toMatchObject({ reason: 'invalid_token' })
  })
})

// The controller's side: the warm agent's start-up token fetches its first task once.
for (const dialect of testDialects()) {
  describe(`${dialect.name}: a warm agent's start-up token fetches its first task, once`, () => {
    let rig: ControllerRig | undefined
    afterEach(async () => {
      await rig?.close()
      rig = undefined
    })

    it('only its own unspent start-up token or the claimed task\'s token gets an answer', async () => {
      const r = (rig = await controllerRig(await dialect.open(), { poolSize: 1 }))
      const member = await waitFor(async () => (await r.store.workspaces.list(r.orgId, { state: ['idle'] })).find((w) => w.pooled), 'a pooled idle workspace')
      const dir = (await r.runtime.provision({ workspaceId: member.id })).dataDir
      await waitFor(async () => existsSync(join(dir, 'warm.pid')), 'the warm agent waiting')
      const boot = await warmClaims(r, dir)
      expect(boot).toMatchObject({ startup: true, jti: expect.any(String) })
      expect(boot.task_id).toBeUndefined()
      // Another start-up token of the same workspace (not this agent's), and a plain workspace token.
      const { token: forged } = await r.tokens.mint({ org_id: r.orgId, workspace_id: member.id }, 60, { startup: true })
      const forgedClaims = (await r.tokens.check(`Bearer ${forged}`)) as { ok: true; claims: typeof boot }
      const { task: t } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'write out.txt once', options: {} })
      const poll = (claims: object) => r.events.handle(claims as typeof boot, 'GET', '/tasks/next', Buffer.alloc(0))
      expect((await poll(forgedClaims.claims)).status).toBe(410)
      expect((await poll({ org_id: r.orgId, workspace_id: member.id, exp: 0 })).status).toBe(410)
      expect((await poll({ org_id: r.orgId, workspace_id: member.id, task_id: 'task_other', exp: 0 })).status).toBe(410)
      const first = await poll(boot)
      expect(first).toMatchObject({ status: 200, body: { id: t!.id, proxy_token: expect.any(String) } })
      // Spent: the same start-up token gets nothing more, and its events are refused.
      expect((await poll(boot)).status).toBe(410)
      expect((await r.events.handle(boot, 'POST', `/task/${t!.id}/event`, Buffer.from('{"type":"task_start"}'))).status).toBe(403)
      await r.events.handle({ org_id: r.orgId, workspace_id: member.id, task_id: t!.id, exp: 0 }, 'POST', `/task/${t!.id}/event`,
        Buffer.from(JSON.stringify({ type: 'task_end', status: 'completed', summary: 'once' })))
      handTask(dir, first.body)
      await waitFor(async () => (await r.store.workspaces.tasks.byId(t!.id))?.status === 'completed', 'the task completed')
    })
  })
}
