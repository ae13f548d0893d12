// Warm pools on real processes: `corral serve` keeps one pool member of a role with its reference
// agent already running and long-polling `GET /tasks/next` through the proxy. `POST /v1/tasks`
// claims that member; the waiting agent gets the task with its own capability token, runs it
// against the fake Anthropic API and completes it; its model calls are attributed to the task (the
// adopted token), and the agent then ends (410) so the workspace snapshots and goes idle.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/ca.js'
import { startFakeAnthropic, type FakeProvider } from '../agent/fake-model.js'
import { startServe, type RunningServe } from '../helpers/serve.js'
import { bwrapAvailable } from '../runtime/helpers.js'
import { onLoopback, portOf } from '../helpers/loopback-caps.js'

const RUNTIME = (await bwrapAvailable()) ? 'local' : 'process'

const CAPS = `
- name: model
  type: http
  allow:
    - domains: ["127.0.0.1"]
      methods: [POST]
      paths: [/v1/messages]
  budgets:
    counters:
      - name: calls
        source: request.count
        task: {max: 100}
`

function script(body: any) {
  const last = body.messages.at(-1)
  const sawResults = Array.isArray(last?.content) && last.content.some((c: any) => c.type === 'tool_result')
  if (sawResults) return { text: 'Done.', tools: [{ name: 'finish', input: { summary: 'warm done' } }], usage: { input: 20, output: 5 } }
  return { tools: [{ name: 'write_file', input: { path: 'warm.txt', content: 'from a warm agent\n' } }], usage: { input: 30, output: 7 } }
}

describe(`warm pool end to end (${RUNTIME} runtime)`, () => {
  let tmp: string
  let provider: FakeProvider
  let serve: RunningServe
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${serve.url}/v1${path}`, {
      method, headers: { authorization: `Bearer ${serve.adminKey}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    })
    return { status: res.status, body: await res.json() as any }
  }
  const until = async <T>(probe: () => Promise<T | undefined | false>, what: string, ms = 30_000): Promise<T> => {
    const end = Date.now() + ms
    for (;;) {
      const v = await probe()
      if (v) return v
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}\n${serve.output().slice(-3000)}`)
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  const audit = async (wsId: string, ...filters: string[]) =>
    (await api('GET', `/workspaces/${wsId}/audit?order=asc&limit=1000${filters.map((f) => `&filter=${encodeURIComponent(f)}`).join('')}`)).body.events as any[]

  beforeAll(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'corral-warm-e2e-'))
    const ca = await loadOrCreateCa(join(tmp, 'upstream-ca'))
    writeFileSync(join(tmp, 'upstream-ca.pem'), ca.certPem)
    provider = await startFakeAnthropic(script, await new LeafMinter(ca).pemFor('127.0.0.1'))
    serve = await startServe({ env: { CORRAL_UPSTREAM_CA: join(tmp, 'upstream-ca.pem') }, args: ['--runtime', RUNTIME] })
  })
  afterAll(async () => {
    await serve?.stop()
    await provider?.close()
    rmSync(tmp, { recursive: true, force: true })
  })

  it('a task claims the pool member whose agent was already waiting, runs and completes there', async () => {
    const prov = await api('POST', '/providers', { name: 'fake-anthropic', kind: 'anthropic', base_url: provider.url, default_model: 'claude-test' })
    expect(prov.status).toBe(201)
    const role = await api('POST', '/agent-roles', { name: 'warm', provider_id: prov.body.id, capabilities: onLoopback(CAPS, portOf(provider.url)), pool_policy: 'static', pool_size: 1 })
    expect(role.status).toBe(201)
    const member = await until(async () => {
      const list = (await api('GET', '/workspaces?state=idle')).body
      return (list.workspaces as any[]).find((w: any) => w.pooled && w.role_id === role.body.id)
    }, 'an idle pool member')

    const created = await api('POST', '/tasks', { role_name: 'warm', description: 'Write warm.txt' })
    expect(created.status).toBe(202)
    expect(created.body.workspace_id).toBe(member.id)
    const taskId: string = created.body.task_id
    const done = await until(async () => {
      const t = (await api('GET', `/tasks/${taskId}`)).body
      return ['completed', 'failed', 'cancelled'].includes(t.status) && t
    }, 'the warm task')
    expect(done).toMatchObject({ status: 'completed', summary: 'warm done' })
    await until(async () => { const w = (await api('GET', `/workspaces/${member.id}`)).body; return w.state === 'idle' && w.task_count === 1 }, 'idle after the task')

    // The model calls carry the task: the agent adopted the task's token at the handover.
    const decisions = await audit(member.id, 'event_type=policy_decision')
    expect(decisions.length).toBe(2)
    for (const d of decisions) expect(d).toMatchObject({ decision: 'allow', task_id: taskId, debits: { calls: 1 } })
    const agent = await audit(member.id, 'actor=agent')
    expect(agent.map((e) => e.event_type)).toEqual(expect.arrayContaining(['session_start', 'task_start', 'file_change', 'task_end']))
    expect(agent.every((e) => e.task_id === taskId && e.debits?.requests === 1)).toBe(true)
    const files = (await api('GET', `/workspaces/${member.id}/snapshot/files`)).body.entries.map((e: any) => e.path)
    expect(files).toContain('warm.txt')
  })
})
