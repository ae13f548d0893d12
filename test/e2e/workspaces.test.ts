// The end-to-end flow on real processes: `corral serve` with the local (bubblewrap)
// runtime — the process runtime where bubblewrap cannot run — a fake Anthropic API over HTTPS on
// loopback speaking the real streaming format, a role whose policy allows only that provider with
// an output-token budget metered from the SSE usage events. A task is submitted with an uploaded
// file; the reference agent writes a file with a tool and finishes; the audit log holds the
// policy decisions with debits, the agent events and the lifecycle events; the snapshot lists the
// files; a fork at 1 gets a follow-up task that sees the parent's file.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { modelPolicy } from '../../src/dev/index.js'
import { startStack, type Stack } from '../helpers/serve.js'
import { bwrapAvailable } from '../runtime/helpers.js'

const RUNTIME = (await bwrapAvailable()) ? 'local' : 'process'

// The model-only policy, as corral dev's demo builds it (src/dev/seed.ts).
const CAPS = modelPolicy({ domain: '127.0.0.1', identity: true, outputTokens: { reserve: 100, failureCharge: 10, workspaceMax: 100_000, taskMax: 50_000 } })

/** The model's side of both tasks: tools first, then `finish` once tool results came back. */
function script(body: any) {
  const last = body.messages.at(-1)
  // A resumed session's new task message also carries the previous turn's tool results.
  if (JSON.stringify(last).includes('follow up')) {
    return { tools: [{ name: 'run_command', input: { command: 'cat report.md > seen-by-fork.txt' } }], usage: { input: 40, output: 11 } }
  }
  const sawResults = Array.isArray(last?.content) && last.content.some((c: any) => c.type === 'tool_result')
  if (sawResults) return { text: 'Done.', tools: [{ name: 'finish', input: { summary: 'all done' } }], usage: { input: 50, output: 17 } }
  return {
    text: 'Writing the report.',
    tools: [
      { name: 'write_file', input: { path: 'report.md', content: '# Report\n' } },
      { name: 'run_command', input: { command: 'cp uploads/*/notes.txt notes-copy.txt' } },
    ],
    usage: { input: 60, output: 23 },
  }
}

describe(`workspaces end to end (${RUNTIME} runtime)`, () => {
  let stack: Stack
  const idleAfter = (id: string, count: number) => stack.until(async () => {
    const w = (await stack.api('GET', `/workspaces/${id}`)).body
    return w.state === 'idle' && w.task_count === count && w
  }, `workspace ${id} idle after ${count} tasks`)

  beforeAll(async () => {
    stack = await startStack({ runtime: RUNTIME, model: script, role: { name: 'coder', capabilities: CAPS } })
  })
  afterAll(() => stack?.close())

  it('task with an upload → agent → events → completed → snapshot; fork at 1 takes a follow-up', async () => {
    // Submit through the CLI with an uploaded file.
    writeFileSync(join(stack.dir, 'notes.txt'), 'remember the milk\n')
    const submitted = await stack.corral(['task', 'submit', '--role', 'coder', 'Write a report', '--file', join(stack.dir, 'notes.txt'), '--json'])
    expect(submitted.code, submitted.stderr).toBe(0)
    const accepted = JSON.parse(submitted.stdout)
    expect(accepted).toMatchObject({ task_id: expect.stringMatching(/^task_/), workspace_id: expect.stringMatching(/^ws_/), status: 'submitted' })
    const wsId: string = accepted.workspace_id

    const done = await stack.taskDone(accepted.task_id)
    expect(done, JSON.stringify(done)).toMatchObject({ status: 'completed', summary: 'all done', uploads: ['notes.txt'] })
    await idleAfter(wsId, 1)

    const decisions = await stack.audit(wsId, 'event_type=policy_decision')
    expect(decisions.length).toBe(2)
    for (const d of decisions) {
      expect(d).toMatchObject({ decision: 'allow', capability_name: 'model', destination: '127.0.0.1', path: '/v1/messages', task_id: accepted.task_id, agent_role: 'coder', agent_provider: 'fake-anthropic' })
    }
    expect(decisions.map((d) => d.debits.output_tokens).sort((a, b) => a - b)).toEqual([17, 23])

    const agentEvents = await stack.audit(wsId, 'actor=agent')
    const kinds = agentEvents.map((e) => e.event_type)
    expect(kinds).toEqual(expect.arrayContaining(['session_start', 'task_start', 'tool_call', 'tool_result', 'file_change', 'task_end']))
    expect(agentEvents.find((e) => e.event_type === 'file_change').detail).toMatchObject({ path: 'report.md', action: 'created' })
    expect(agentEvents.every((e) => e.category === 'activity' && e.task_id === accepted.task_id)).toBe(true)

    const lifecycle = (await stack.audit(wsId, 'actor=control-plane')).map((e) => e.event_type)
    expect(lifecycle).toEqual(['workspace_created', 'task_submitted', 'workspace_provisioned', 'task_completed'])

    const files = (await stack.api('GET', `/workspaces/${wsId}/snapshot/files`)).body.entries.map((e: any) => e.path)
    expect(files).toEqual(expect.arrayContaining(['report.md', 'notes-copy.txt', `uploads/${accepted.task_id}/notes.txt`]))

    // Fork at 1 and give the child a follow-up that reads the parent's file.
    const fork = await stack.api('POST', `/workspaces/${wsId}/fork`, { fork_point_task_count: 1 })
    expect(fork).toMatchObject({ status: 202, body: { status: 'provisioning' } })
    const child: string = fork.body.workspace_id
    await stack.until(async () => (await stack.api('GET', `/workspaces/${child}`)).body.state === 'idle', 'fork provisioned')
    // The follow-up goes through `task submit --wait --json`: NDJSON of the task's events, then the task.
    const waited = await stack.corral(['task', 'submit', '--workspace', child, 'follow up: check the report', '--wait', '--json'])
    expect(waited.code, waited.stderr).toBe(0)
    const lines = waited.stdout.trim().split('\n').map((l) => JSON.parse(l))
    const final = lines.at(-1)
    expect(final).toMatchObject({ status: 'completed', workspace_id: child, summary: 'all done' })
    const streamed = lines.slice(0, -1).map((e) => e.event_type)
    expect(streamed).toEqual(expect.arrayContaining(['task_submitted', 'task_start', 'tool_call', 'task_end']))
    expect(streamed.at(-1)).toBe('task_completed')
    expect(lines.slice(0, -1).every((e) => e.workspace_id === child && (e.task_id === undefined || e.task_id === final.id))).toBe(true)
    await idleAfter(child, 1)
    const childFiles = (await stack.api('GET', `/workspaces/${child}/snapshot/files`)).body.entries.map((e: any) => e.path)
    expect(childFiles).toEqual(expect.arrayContaining(['report.md', 'seen-by-fork.txt']))
    const childEvents = (await stack.audit(child)).map((e) => e.event_type)
    expect(childEvents).toEqual(expect.arrayContaining(['workspace_fork_created', 'workspace_created', 'workspace_provisioned', 'task_submitted', 'task_completed']))
    expect((await stack.audit(wsId, 'event_type=workspace_forked'))[0].detail).toMatchObject({ child_workspace_id: child, fork_point_task_count: 1 })

    // The people's view of --wait: live lines on stderr, ending with the task's outcome; exit 0.
    const watched = await stack.corral(['task', 'submit', '--workspace', wsId, 'Another pass over the report', '--wait'])
    expect(watched.code, watched.stderr).toBe(0)
    expect(watched.stderr).toMatch(/task_end/)
    expect(watched.stderr).toMatch(/Task task_\w+ completed: all done/)
    await idleAfter(wsId, 2)

    // The workspace commands against the same serve.
    const cli = async (...args: string[]) => {
      const r = await stack.corral([...args, '--json'])
      expect(r.code, r.stderr).toBe(0)
      return JSON.parse(r.stdout)
    }
    const listed = await cli('workspace', 'list', '--role', 'coder')
    expect(listed.map((w: any) => w.id)).toEqual([child, wsId])
    expect((await cli('workspace', 'files', child)).map((f: any) => f.path)).toContain('seen-by-fork.txt')
    expect(await cli('workspace', 'show', wsId)).toMatchObject({ id: wsId, task_count: 2, tasks: [{ id: accepted.task_id, status: 'completed' }, { status: 'completed' }] })
    expect(await cli('task', 'show', accepted.task_id)).toMatchObject({ status: 'completed', uploads: ['notes.txt'] })
    const logs = await cli('workspace', 'logs', wsId, '--activity')
    expect(logs.every((e: any) => e.category === 'activity' && e.workspace_id === wsId)).toBe(true)
    expect(logs.map((e: any) => e.event_type)).toEqual(expect.arrayContaining(['workspace_created', 'task_submitted', 'tool_call', 'task_completed']))
    expect(await cli('workspace', 'stop', child)).toMatchObject({ id: child, state: 'stopped' })
    const again = await stack.corral(['workspace', 'stop', child])
    expect(again.code).toBe(1)
    expect(again.stderr).toContain('workspace_already_stopped')
    expect(await cli('workspace', 'archive', child)).toMatchObject({ state: 'archived' })
    expect((await cli('workspace', 'list', '--state', 'archived')).map((w: any) => w.id)).toEqual([child])
  }, 90_000)
})
