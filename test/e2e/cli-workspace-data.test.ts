// What a workspace left behind, through the built binary against a real serve with the fake model
// (issue 12 §3): `workspace logs --agent [-f]` (the agent's own stdout/stderr, served by the API
// from the database), `workspace cat` and `workspace download` (a file, a directory as a tar, all of
// /data; --snapshot N; refusals as one line and exit 1; nothing left behind on failure).
import { spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { list as tarList } from 'tar'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { modelPolicy } from '../../src/dev/index.js'
import { CORRAL_BIN, hermeticEnv, startStack, type Stack } from '../helpers/serve.js'
import { bwrapAvailable } from '../runtime/helpers.js'

const RUNTIME = (await bwrapAvailable()) ? 'local' : 'process'

// The model-only policy, as corral dev's demo builds it (src/dev/seed.ts).
const CAPS = modelPolicy({ domain: '127.0.0.1' })

function script(body: any) {
  const last = body.messages.at(-1)
  const sawResults = Array.isArray(last?.content) && last.content.some((c: any) => c.type === 'tool_result')
  if (sawResults) return { text: 'Done.', tools: [{ name: 'finish', input: { summary: 'all done' } }], usage: { input: 50, output: 17 } }
  return { text: 'Writing.', tools: [{ name: 'write_file', input: { path: 'out/report.md', content: '# Report\n' } }], usage: { input: 60, output: 23 } }
}

describe(`CLI: a workspace's output and files (${RUNTIME} runtime)`, () => {
  let stack: Stack
  let taskId: string
  let wsId: string
  beforeAll(async () => {
    stack = await startStack({ runtime: RUNTIME, model: script, role: { name: 'coder', capabilities: CAPS } })
    const r = await stack.corral(['task', 'submit', '--role', 'coder', 'Write the report', '--wait'])
    expect(r.code, r.stderr).toBe(0)
    ;[, taskId, wsId] = /Task (task_\S+) submitted to workspace (ws_\S+);/.exec(r.stderr) ?? []
    await stack.until(async () => (await stack.api('GET', `/workspaces/${wsId}`)).body.state === 'idle', 'workspace idle')
  }, 60_000)
  afterAll(() => stack?.close())

  it('workspace logs --agent prints what the agent process wrote; --json gives the chunks; an unknown workspace is one line, exit 1', async () => {
    // The reference agent writes one line per task to stderr when it ends (src/agent/main.ts).
    const line = new RegExp(`^task ${taskId}: completed after \\d+ iterations$`, 'm')
    await stack.until(async () => line.test((await stack.corral(['workspace', 'logs', wsId, '--agent'])).stdout), 'the agent output stored')
    const json = await stack.corral(['workspace', 'logs', wsId, '--agent', '--json'])
    expect(json.code, json.stderr).toBe(0)
    const chunks = JSON.parse(json.stdout)
    expect(chunks[0]).toEqual({ seq: 1, at: expect.any(String), text: expect.any(String) })
    expect(chunks.map((c: any) => c.text).join('')).toMatch(line)
    const missing = await stack.corral(['workspace', 'logs', 'ws_nope', '--agent'])
    expect(missing.code).toBe(1)
    expect(missing.stderr.trim().split('\n')).toHaveLength(1)
    expect(missing.stderr).toContain('[workspace_not_found]')
  })

  it('workspace logs --agent -f prints the stored output, then a later task\'s as it comes; Ctrl-C ends it with exit 0', async () => {
    const child = spawn(process.execPath, [CORRAL_BIN, 'workspace', 'logs', wsId, '--agent', '-f'], { env: { ...hermeticEnv(), NO_COLOR: '1', ...stack.cliEnv }, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.on('data', (d) => { out += d })
    child.stderr.on('data', (d) => { err += d })
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)))
    try {
      await stack.until(async () => out.includes(`task ${taskId}: completed`), 'the stored output')
      const next = await stack.api('POST', `/workspaces/${wsId}/tasks`, { description: 'Another pass' })
      expect(next.status).toBe(202)
      await stack.until(async () => out.includes(`task ${next.body.task_id}: completed`), `the follow-up's output (stderr: ${err})`)
      expect(out.split(`task ${taskId}: completed`)).toHaveLength(2) // printed once, not again on reconnect
    } finally {
      child.kill('SIGINT')
    }
    expect(await exited).toBe(0)
  }, 60_000)

  it('workspace cat prints a file of the latest snapshot; a directory, a traversal and a missing file are one line, exit 1', async () => {
    const r = await stack.corral(['workspace', 'cat', wsId, 'out/report.md'])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toBe('# Report\n')
    const at1 = await stack.corral(['workspace', 'cat', wsId, 'out/report.md', '--snapshot', '1'])
    expect(at1.stdout).toBe('# Report\n')
    for (const [path, said] of [['out', 'is a directory in the snapshot'], ['../etc/passwd', '[validation_error]'], ['nope.txt', '[not_found]']]) {
      const bad = await stack.corral(['workspace', 'cat', wsId, path!])
      expect(bad.code, path).toBe(1)
      expect(bad.stderr.trim().split('\n'), path).toHaveLength(1)
      expect(bad.stderr, path).toContain(said)
    }
  })

  it('workspace download: a file, a directory and all of /data as tars; refuses to overwrite without --force; progress off a terminal as lines', async () => {
    const file = join(stack.dir, 'report.md')
    const r = await stack.corral(['workspace', 'download', wsId, 'out/report.md', '-o', file])
    expect(r.code, r.stderr).toBe(0)
    expect(readFileSync(file, 'utf8')).toBe('# Report\n')
    expect(r.stderr).toMatch(/^Downloading out\/report\.md: 9 B of 9 B \(100%\)$/m)
    expect(r.stderr).not.toMatch(/\r|\u001B\[/)
    const again = await stack.corral(['workspace', 'download', wsId, 'out/report.md', '-o', file])
    expect(again.code).toBe(1)
    expect(again.stderr).toContain('exists; pass --force to replace it')
    writeFileSync(file, 'old')
    expect((await stack.corral(['workspace', 'download', wsId, 'out/report.md', '-o', file, '--force', '--quiet'])).stderr).toBe('')
    expect(readFileSync(file, 'utf8')).toBe('# Report\n')

    const dirTar = join(stack.dir, 'out.tar')
    const d = await stack.corral(['workspace', 'download', wsId, 'out', '-o', dirTar, '--json'])
    expect(d.code, d.stderr).toBe(0)
    expect(JSON.parse(d.stdout)).toMatchObject({ workspace_id: wsId, path: 'out', type: 'directory', file: dirTar })
    expect(d.stderr).toBe('')
    const names: string[] = []
    await tarList({ file: dirTar, onReadEntry: (e) => void names.push(e.path.replace(/^\.\//, '')) })
    expect(names.sort()).toEqual(['out/', 'out/report.md'])

    const allTar = join(stack.dir, 'all.tar')
    expect((await stack.corral(['workspace', 'download', wsId, '-o', allTar, '-q'])).code).toBe(0)
    const all: string[] = []
    await tarList({ file: allTar, onReadEntry: (e) => void all.push(e.path.replace(/^\.\//, '')) })
    expect(all).toContain('out/report.md')

    const missing = await stack.corral(['workspace', 'download', wsId, 'nope', '-o', join(stack.dir, 'nope')])
    expect(missing.code).toBe(1)
    expect(existsSync(join(stack.dir, 'nope'))).toBe(false)
    expect(readdirSync(stack.dir).filter((n) => n.endsWith('.partial'))).toEqual([])
  })
})
