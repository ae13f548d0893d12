// Packs in workspaces on real processes: `corral serve` with the local (bubblewrap) runtime — the
// process runtime where bubblewrap cannot run. The example pack examples/packs/shell-agent (POSIX
// sh + curl, not corral's agent) is uploaded through the API and attached to a role; a task runs
// that agent, which takes its task the documented way and reports its events through the proxy.
// The audit log holds them (actor agent), the snapshot lists the file it wrote, the task
// completes, and an event breaking the pack's own schema is refused (the agent sees 400; no row).
// A warm pool member of a second role runs the same agent ahead and gets its task over HTTP.
import { readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { create as tar } from 'tar'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startStack, type Stack } from '../helpers/serve.js'
import { bwrapAvailable } from '../runtime/helpers.js'

const RUNTIME = (await bwrapAvailable()) ? 'local' : 'process'
const PACK_DIR = resolve(import.meta.dirname, '../../examples/packs/shell-agent')

// The shell agent makes no outbound call but its events. The task-scoped events counter shows
// which token an event came with: only a task's own token has a task scope.
const CAPS = `
- name: model
  type: http
  allow:
    - domains: ["127.0.0.1"]
      methods: [POST]
      paths: [/v1/messages]
- name: agent_events
  type: http
  allow:
    - domains: ["corral.internal"]
      methods: [POST]
  budgets:
    counters:
      - name: events
        source: request.count
        task: {max: 50}
`

describe(`packs in workspaces end to end (${RUNTIME} runtime)`, () => {
  let stack: Stack
  /** The agent's log on the host (what it wrote to stderr), for failure messages. */
  const agentLog = (wsId: string) => {
    try {
      return readFileSync(join(stack.serve.dataDir, 'runtime', 'workspaces', wsId, 'logs', 'agent.log'), 'utf8')
    } catch {
      return ''
    }
  }

  // The provider is a dead address: the shell agent calls no model.
  beforeAll(async () => {
    stack = await startStack({ runtime: RUNTIME, provider: { name: 'none' } })
  })
  afterAll(() => stack?.close())

  it('a pack\'s agent runs a task under corral: events audited, file in the snapshot, pack schema enforced; warm members run it too', async () => {
    // Upload the example pack (multipart, field `archive`).
    const archive = join(stack.dir, 'shell-agent.tar.gz')
    await tar({ gzip: true, file: archive, cwd: PACK_DIR, portable: true }, ['pack.yaml', 'agent.sh'])
    const form = new FormData()
    form.set('archive', new Blob([readFileSync(archive)], { type: 'application/gzip' }), 'shell-agent.tar.gz')
    const uploaded = await fetch(`${stack.serve.url}/v1/packs/upload`, { method: 'POST', headers: { authorization: `Bearer ${stack.serve.adminKey}` }, body: form })
    const pack = await uploaded.json() as any
    expect(uploaded.status, JSON.stringify(pack)).toBe(201)
    expect(pack).toMatchObject({ name: 'shell-agent', image_digest: expect.stringMatching(/^sha256:/) })

    const role = await stack.api('POST', '/agent-roles', { name: 'shell', provider_id: stack.provider!.id, capabilities: CAPS, pack_ids: [pack.id] })
    expect(role.status, JSON.stringify(role.body)).toBe(201)

    // A cold workspace: the task reaches the agent in its inbox.
    const submitted = await stack.api('POST', '/tasks', { role_name: 'shell', description: 'hello from the pack test; break-schema' })
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(202)
    const { task_id: taskId, workspace_id: wsId } = submitted.body
    const done = await stack.taskDone(taskId)
    expect(done, agentLog(wsId)).toMatchObject({ status: 'completed' })
    // The agent saw its schema-breaking event refused with a 400.
    expect(done.summary).toBe('wrote shell-agent.txt; progress_status without percent answered 400')
    expect(agentLog(wsId)).toMatch(/event refused \(400\).*does not match the schema of pack shell-agent/)

    // The task's end commits with its lifecycle rows; the agent's own task_end row is durable in the
    // journal by then and reaches the database with the writer's next batch.
    const events = await stack.until(async () => {
      const rows = await stack.audit(wsId, 'actor=agent')
      return rows.some((e) => e.event_type === 'task_end') && rows
    }, 'the agent\'s task_end row in the audit log')
    expect(events.map((e) => e.event_type)).toEqual(['session_start', 'task_start', 'progress_status', 'file_change', 'progress_status', 'task_end'])
    expect(events.every((e) => e.category === 'activity' && e.task_id === taskId && e.agent_role === 'shell')).toBe(true)
    expect(events.find((e) => e.event_type === 'task_start').detail).toMatchObject({ description: 'hello from the pack test; break-schema' })
    expect(events.find((e) => e.event_type === 'file_change').detail).toMatchObject({ path: 'shell-agent.txt', action: 'created', size: 39 })
    // Only the valid progress events were recorded.
    expect(events.filter((e) => e.event_type === 'progress_status').map((e) => e.detail.percent)).toEqual([10, 100])
    expect(events.map((e) => e.debits)).toEqual(Array(6).fill({ events: 1 }))

    await stack.until(async () => (await stack.api('GET', `/workspaces/${wsId}`)).body.task_count === 1, 'the after-task snapshot')
    const files = (await stack.api('GET', `/workspaces/${wsId}/snapshot/files`)).body.entries.map((e: any) => e.path)
    expect(files).toContain('shell-agent.txt')

    // A warm pool member of another role with the pack: its agent waits in GET /tasks/next.
    const warmRole = await stack.api('POST', '/agent-roles', { name: 'shell-warm', provider_id: stack.provider!.id, capabilities: CAPS, pack_ids: [pack.id], pool_policy: 'static', pool_size: 1 })
    expect(warmRole.status, JSON.stringify(warmRole.body)).toBe(201)
    const member = await stack.until(async () => {
      const list = (await stack.api('GET', '/workspaces?role=shell-warm')).body.workspaces as any[]
      return list.find((w) => w.state === 'idle')
    }, 'an idle pool member', 60_000)
    const claimed = await stack.api('POST', '/tasks', { role_name: 'shell-warm', description: 'warm hello' })
    expect(claimed.status).toBe(202)
    expect(claimed.body.workspace_id).toBe(member.id)
    const warmDone = await stack.taskDone(claimed.body.task_id)
    expect(warmDone, agentLog(member.id)).toMatchObject({ status: 'completed', summary: 'wrote shell-agent.txt' })
    const warmEvents = await stack.audit(member.id, 'actor=agent')
    expect(warmEvents.map((e) => e.event_type)).toEqual(['session_start', 'task_start', 'progress_status', 'file_change', 'progress_status', 'task_end'])
    expect(warmEvents.every((e) => e.task_id === claimed.body.task_id)).toBe(true)
    // The agent switched to the task's own token (handed over with the task) before its events.
    expect(warmEvents.map((e) => e.budget_state?.events?.task?.used)).toEqual([1, 2, 3, 4, 5, 6])
  }, 120_000)
})
