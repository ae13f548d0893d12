import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { packageRoot } from '../../src/runtime/layout.js'
import { type FakeProvider, startFakeOpenAi } from './fake-model.js'

const run = promisify(execFile)

// `corral agent` as a person runs it: the real binary (development entry), a task file, events as
// NDJSON on stdout, and a fake OpenAI-compatible provider on loopback.
describe('corral agent (command)', () => {
  let dir: string
  let provider: FakeProvider

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'corral-agent-cmd-'))
    provider = await startFakeOpenAi((_b, i) => i === 0
      ? { tools: [{ name: 'write_file', input: { path: 'note.txt', content: 'from the command' } }] }
      : { tools: [{ name: 'finish', input: { summary: 'noted' } }] })
  })
  afterAll(async () => {
    await provider.close()
    await rm(dir, { recursive: true, force: true })
  })

  const env = (extra: Record<string, string>): NodeJS.ProcessEnv => ({ PATH: process.env.PATH, HOME: dir, NO_COLOR: '1', ...extra })

  it('runs the tasks of a file and prints its events as NDJSON with --events -', async () => {
    await writeFile(join(dir, 'tasks.json'), JSON.stringify({ id: 'task_cmd', description: 'write a note' }))
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', join(packageRoot(), 'bin', 'dev.js'), 'agent', '--task-file', join(dir, 'tasks.json'), '--events', '-'], {
      cwd: packageRoot(),
      env: env({ CORRAL_PROVIDER_KIND: 'openai', CORRAL_PROVIDER_BASE_URL: `${provider.url}/v1`, CORRAL_MODEL: 'gpt-test', CORRAL_WORKSPACE_DIR: dir }),
    })
    const events = stdout.trim().split('\n').map((l) => JSON.parse(l))
    expect(events[0]).toMatchObject({ task_id: 'task_cmd', type: 'session_start', provider: 'openai', model: 'gpt-test' })
    expect(events.find((e) => e.type === 'task_end')).toMatchObject({ status: 'completed', summary: 'noted' })
    expect(stderr).toContain('task task_cmd: completed after 2 iterations')
    expect(await readFile(join(dir, 'note.txt'), 'utf8')).toBe('from the command')
  }, 60_000)

  it('fails with one line naming what is missing', async () => {
    const err = await run(process.execPath, ['--import', 'tsx', join(packageRoot(), 'bin', 'dev.js'), 'agent'], { cwd: packageRoot(), env: env({}) })
      .then(() => null, (e: { code: number; stderr: string }) => e)
    expect(err?.code).toBe(1)
    expect(err?.stderr.trim()).toMatch(/^Error: corral agent is not configured: CORRAL_MODEL is not set/)
    expect(err?.stderr.trim().split('\n')).toHaveLength(1)
  }, 60_000)
})
