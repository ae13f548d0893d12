// What a workspace left behind, through the built binary against a real serve with the fake model
// (issue 12 §3): `workspace logs --agent [-f]` (the agent's own stdout/stderr, served by the API
// from the database), `workspace cat` and `workspace download` (a file, a directory as a tar, all of
// /data; --snapshot N; refusals as one line and exit 1; nothing left behind on failure), and
// `ca export` / `admin proxy-token` against the API one is logged in to (issue 12 §3).
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { list as tarList } from 'tar'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { modelPolicy } from '../../src/dev/index.js'
import { CORRAL_BIN, hermeticEnv, runCorral, startStack, type Stack } from '../helpers/serve.js'
import { bwrapAvailable } from '../runtime/helpers.js'

const RUNTIME = (await bwrapAvailable()) ? 'local' : 'process'

// The model-only policy, as corral dev's demo builds it (src/dev/seed.ts).
const CAPS = modelPolicy({ domain: '127.0.0.1' })

function script(body: any) {
  const last = body.messages.at(-1)
  const sawResults = Array.isArray(last?.content) && last.content.some((c: any) => c.type === 'tool_result')
  if (sawResults) return { text: 'Done.', tools: [{ name: 'finish', input: { summary: 'all done' } }], usage: { input: 50, output: 17 } }
  return {
    text: 'Writing.',
    tools: [
      { name: 'write_file', input: { path: 'out/report.md', content: '# Report\n' } },
      // Bytes that are not UTF-8, for `workspace cat --json`'s base64 form.
      { name: 'run_command', input: { command: "mkdir -p bin && printf '\\211PNG\\000\\377' > bin/blob.bin" } },
    ],
    usage: { input: 60, output: 23 },
  }
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
    // The agent's output is the default (issue 12 §3: `workspace logs ID -f`); --activity gives the events instead.
    const plain = await stack.corral(['workspace', 'logs', wsId])
    expect(plain.code, plain.stderr).toBe(0)
    expect(plain.stdout).toMatch(line)
    const activity = await stack.corral(['workspace', 'logs', wsId, '--activity', '--json'])
    expect(activity.code, activity.stderr).toBe(0)
    expect(JSON.parse(activity.stdout).map((e: any) => e.event_type)).toContain('task_completed')
    const both = await stack.corral(['workspace', 'logs', wsId, '--agent', '--activity'])
    expect(both.code).not.toBe(0)
    expect(both.stderr).toMatch(/--agent|--activity/)
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

  it('workspace cat --json: one object with the path and the content, UTF-8 as text and other bytes as base64; refusals are the JSON error', async () => {
    const text = await stack.corral(['workspace', 'cat', wsId, 'out/report.md', '--json'])
    expect(text.code, text.stderr).toBe(0)
    expect(JSON.parse(text.stdout)).toEqual({ workspace_id: wsId, path: 'out/report.md', snapshot: null, size: 9, encoding: 'utf8', content: '# Report\n' })
    const at1 = await stack.corral(['workspace', 'cat', wsId, 'out/report.md', '--snapshot', '1', '--json'])
    expect(JSON.parse(at1.stdout)).toMatchObject({ snapshot: 1, content: '# Report\n' })
    const blob = await stack.corral(['workspace', 'cat', wsId, 'bin/blob.bin', '--json'])
    expect(blob.code, blob.stderr).toBe(0)
    const parsed = JSON.parse(blob.stdout) as { encoding: string; content: string; size: number }
    expect(parsed).toMatchObject({ encoding: 'base64', size: 6 })
    expect(Buffer.from(parsed.content, 'base64')).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0xff]))
    for (const [path, code] of [['out', 'is_a_directory'], ['nope.txt', 'not_found']]) {
      const bad = await stack.corral(['workspace', 'cat', wsId, path!, '--json'])
      expect(bad.code, path).toBe(1)
      expect(JSON.parse(bad.stdout), path).toMatchObject({ error: { code }, exit_code: 1 })
    }
  })

  it('workspace download: a file, a directory and all of /data as tars; refuses to overwrite without --force; progress off a terminal as lines', async () => {
    const file = join(stack.dir, 'report.md')
    const r = await stack.corral(['workspace', 'download', wsId, 'out/report.md', '-o', file])
    expect(r.code, r.stderr).toBe(0)
    expect(readFileSync(file, 'utf8')).toBe('# Report\n')
    expect(r.stderr).toBe(`Saved the file to ${file}.\n`)
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

  it('ca export and admin proxy-token go to the API of the logged-in server; not logged in, they say so and create nothing', async () => {
    const ca = await stack.corral(['ca', 'export', '--json'])
    expect(ca.code, ca.stderr).toBe(0)
    expect(JSON.parse(ca.stdout).pem).toBe(readFileSync(join(stack.serve.dataDir, 'ca.pem'), 'utf8'))
    const tok = await stack.corral(['admin', 'proxy-token', '--workspace', wsId, '--ttl', '5m', '--json'])
    expect(tok.code, tok.stderr).toBe(0)
    const minted = JSON.parse(tok.stdout)
    expect(minted).toMatchObject({ workspace_id: wsId, token: expect.any(String), expires_at: expect.any(String) })
    const audited = (await stack.api('GET', '/audit?filter=event_type=proxy_token_minted')).body.events
    expect(audited.map((e: any) => e.workspace_id)).toEqual([wsId])
    expect(JSON.stringify(audited)).not.toContain(minted.token)

    // An empty HOME and working directory, no login: one clear line, exit 1, nothing written anywhere.
    const home = join(stack.dir, 'empty-home')
    mkdirSync(home)
    const bare = { HOME: home, XDG_CONFIG_HOME: join(home, '.config') }
    for (const args of [['ca', 'export'], ['admin', 'proxy-token', '--workspace', wsId]]) {
      const r = await new Promise<{ code: number | null; stderr: string }>((done) => {
        const child = spawn(process.execPath, [CORRAL_BIN, ...args], { cwd: home, env: { ...hermeticEnv(), NO_COLOR: '1', ...bare }, stdio: ['ignore', 'ignore', 'pipe'] })
        let stderr = ''
        child.stderr.on('data', (d) => { stderr += d })
        child.once('close', (code) => done({ code, stderr }))
      })
      expect(r.code, args.join(' ')).toBe(1)
      expect(r.stderr.trim()).toBe('Error: not logged in to a corral server: run `corral login` (or pass --api-url and --token), or pass --data-dir where serve runs')
    }
    expect(readdirSync(home)).toEqual([])
    // A named profile that does not exist is its own error, not a fallback.
    expect((await runCorral(['ca', 'export', '--profile', 'nope'], { env: bare })).code).not.toBe(0)
  })

  it('pack upload reports on stderr (byte lines off a terminal only past the first interval); nothing with --json or --quiet', async () => {
    const r = await stack.corral(['pack', 'upload', 'examples/packs/hello-pack'])
    expect(r.code, r.stderr).toBe(0)
    // A small pack goes within the first interval: no byte line off a terminal, only the outcome (test/cli/progress).
    expect(r.stderr).toMatch(/^Uploaded; the server accepted the pack\.$/m)
    expect(r.stderr).not.toMatch(/\r|\u001B\[/)
    const quiet = await stack.corral(['pack', 'reupload', 'hello-pack', 'examples/packs/hello-pack', '--quiet'])
    expect(quiet.code, quiet.stderr).toBe(0)
    expect(quiet.stderr).toBe('')
    const json = await stack.corral(['pack', 'reupload', 'hello-pack', 'examples/packs/hello-pack', '--json'])
    expect(json.code, json.stderr).toBe(0)
    expect(json.stderr).toBe('')
  })
})
