// The task and workspace commands of the CLI through the built binary against a real serve with
// the fake model: `task submit --wait`'s view (each policy decision with its outcome, destination,
// capability and debits; no cursor movement when stderr is not a terminal; NO_COLOR), `task watch`,
// `task list`, `workspace fork --wait` and `workspace stop`'s progress on stderr.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { modelPolicy } from '../../src/dev/index.js'
import type { TaskRecord } from '../../src/client/index.js'
import { runCorral, startStack, type Stack } from '../helpers/serve.js'
import { bwrapAvailable } from '../runtime/helpers.js'

const RUNTIME = (await bwrapAvailable()) ? 'local' : 'process'

// The model-only policy, as corral dev's demo builds it (src/dev/seed.ts).
const CAPS = modelPolicy({ domain: '127.0.0.1', identity: true, outputTokens: { reserve: 100, workspaceMax: 100_000 } })

function script(body: any) {
  const last = body.messages.at(-1)
  const sawResults = Array.isArray(last?.content) && last.content.some((c: any) => c.type === 'tool_result')
  if (sawResults) return { text: 'Done.', tools: [{ name: 'finish', input: { summary: 'all done' } }], usage: { input: 50, output: 17 } }
  return { text: 'Writing.', tools: [{ name: 'write_file', input: { path: 'report.md', content: '# Report\n' } }], usage: { input: 60, output: 23 } }
}

/** Any escape sequence other than colour (SGR): cursor movement, line erase, carriage return. */
const CURSOR = /\u001B\[[0-9;]*[A-HJKSTfsu]|\r/

describe(`CLI task and workspace commands (${RUNTIME} runtime)`, () => {
  let stack: Stack
  let taskId: string
  let wsId: string
  beforeAll(async () => {
    stack = await startStack({ runtime: RUNTIME, model: script, role: { name: 'coder', capabilities: CAPS } })
  })
  afterAll(() => stack?.close())

  it('task submit --wait shows each policy decision with destination, capability and debits; plain lines off a terminal', async () => {
    const r = await stack.corral(['task', 'submit', '--role', 'coder', 'Write the report', '--wait'])
    expect(r.code, r.stderr).toBe(0)
    ;[, taskId, wsId] = /Task (task_\S+) submitted to workspace (ws_\S+);/.exec(r.stderr) ?? []
    expect(taskId).toBeDefined()
    expect(r.stderr).toMatch(/^\d\d:\d\d:\d\d {2}allow {2}POST 127\.0\.0\.1(:\d+)?\/v1\/messages {2}cap=model {2}debits output_tokens=23/m)
    expect(r.stderr).toMatch(/^\d\d:\d\d:\d\d {2}tool_call {2}iteration=1 tool_use_id=\S+ tool=write_file$/m)
    expect(r.stderr).toMatch(/^\d\d:\d\d:\d\d {2}task_completed/m)
    expect(r.stderr).toMatch(new RegExp(`^Task ${taskId} completed: all done after \\d+s$`, 'm'))
    expect(r.stderr).not.toMatch(CURSOR)
    expect(r.stderr).not.toContain('\u001B[') // NO_COLOR (set by runCorral), and not a terminal
    expect(r.stdout).toBe('')
  })

  it('FORCE_COLOR colours the lines but still moves no cursor; NO_COLOR wins over it', async () => {
    const coloured = await runCorral(['task', 'watch', taskId], { env: { ...stack.cliEnv, FORCE_COLOR: '1', NO_COLOR: '' } })
    expect(coloured.code, coloured.stderr).toBe(0)
    expect(coloured.stderr).toMatch(/\u001B\[32mallow\u001B\[0m/)
    expect(coloured.stderr).not.toMatch(CURSOR)
    const plain = await runCorral(['task', 'watch', taskId], { env: { ...stack.cliEnv, FORCE_COLOR: '1', NO_COLOR: '1' } })
    expect(plain.stderr).not.toContain('\u001B[')
  })

  it('task watch re-attaches to a task (here a finished one): the same events, NDJSON with --json ending with the task', async () => {
    const r = await stack.corral(['task', 'watch', taskId, '--json'])
    expect(r.code, r.stderr).toBe(0)
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l))
    expect(lines.at(-1)).toMatchObject({ id: taskId, status: 'completed' })
    const decisions = lines.filter((e) => e.event_type === 'policy_decision')
    expect(decisions.length).toBeGreaterThan(0)
    expect(decisions.every((e) => e.task_id === taskId && e.decision === 'allow')).toBe(true)
    const missing = await stack.corral(['task', 'watch', 'task_nope'])
    expect(missing.code).toBe(1)
    expect(missing.stderr).toMatch(/\[not_found\]/)
  })

  it('task list: every task newest first, by workspace and by status', async () => {
    const all = await stack.corral(['task', 'list', '--json'])
    expect(all.code, all.stderr).toBe(0)
    const tasks = JSON.parse(all.stdout) as TaskRecord[]
    expect(tasks.map((t) => t.id)).toContain(taskId)
    const mine = JSON.parse((await stack.corral(['task', 'list', '--workspace', wsId, '--status', 'completed', '--json'])).stdout) as TaskRecord[]
    expect(mine.map((t) => t.id)).toEqual([taskId])
    expect(JSON.parse((await stack.corral(['task', 'list', '--status', 'running', '--json'])).stdout)).toEqual([])
    const people = await stack.corral(['task', 'list'])
    expect(people.stdout.split('\n')[0]).toMatch(/^ID\s+STATUS\s+REASON\s+CREATED_AT\s+DESCRIPTION/)
    const bad = await stack.corral(['task', 'list', '--status', 'done'])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toMatch(/--status: unknown status done/)
  })

  it('workspace fork --wait returns once the fork is idle, with progress on stderr', async () => {
    await stack.until(async () => (await stack.api('GET', `/workspaces/${wsId}`)).body.state === 'idle', 'parent idle')
    const r = await stack.corral(['workspace', 'fork', wsId, '--at', '1', '--wait', '--json'])
    expect(r.code, r.stderr).toBe(0)
    const out = JSON.parse(r.stdout)
    expect(out).toMatchObject({ status: 'idle', parent_workspace_id: wsId, fork_point_task_count: 1, workspace: { state: 'idle' } })
    expect(r.stderr).toContain(`Fork ${out.workspace_id} is idle.`)
    expect(r.stderr).not.toMatch(CURSOR)
  })

  it('workspace stop says it is snapshotting, then that the snapshot is taken', async () => {
    const r = await stack.corral(['workspace', 'stop', wsId])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stderr).toMatch(new RegExp(`^Stopping ${wsId}: cancelling its task, snapshotting /data$`, 'm'))
    expect(r.stderr).toMatch(/^Snapshot taken after 1 tasks\.$/m)
    expect(r.stdout).toBe(`Workspace ${wsId} is stopped\n`)
  })
})
