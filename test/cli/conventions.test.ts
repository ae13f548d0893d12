// CLI conventions across every command, on the built binary (`npm run build` first): every
// command takes --json, and the long-running ones (serve, dev, proxy) print their ready line as
// one JSON object under it, every stdout line JSON; every usage error — an unknown command in any
// shape, an unknown flag on any command, a missing argument — exits 2 with one line; and no
// error line carries colour into a pipe or under NO_COLOR, even when stdout is a terminal.
import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Config } from '@oclif/core'
import { afterAll, describe, expect, it } from 'vitest'
import { runCommand } from '../commands/run-command.js'
import { CORRAL_BIN, hermeticEnv, runCorral } from '../helpers/serve.js'

const manifest = JSON.parse(readFileSync(new URL('../../oclif.manifest.json', import.meta.url), 'utf8')) as { commands: Record<string, { flags: Record<string, unknown>; hidden?: boolean }> }
const ids = Object.keys(manifest.commands).sort()
const ESC = '\u001B'
const dirs: string[] = []
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'corral-cli-conv-'))
  dirs.push(d)
  return d
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

describe('every command', () => {
  it('takes --json', () => {
    expect(ids.length).toBeGreaterThan(50)
    expect(ids.filter((id) => !('json' in manifest.commands[id]!.flags))).toEqual([])
  })

  it('exits 2 with one usage line on an unknown flag or a missing argument (each command, in-process)', async () => {
    const config = await Config.load(fileURLToPath(new URL('../../', import.meta.url)))
    const failures: string[] = []
    for (const id of ids) {
      const command = await config.findCommand(id)!.load()
      for (const argv of [['--no-such-flag-anywhere'], ['--json', '--no-such-flag-anywhere']]) {
        const r = await runCommand(command as never, argv, { CORRAL_API_URL: 'http://127.0.0.1:9', CORRAL_TOKEN: 'x' })
        const json = argv.includes('--json')
        const said = json ? r.stdout : r.stderr
        if (r.exitCode !== 2 || !said.includes('no-such-flag-anywhere') || (!json && r.stderr.trim().split('\n').length !== 1)) failures.push(`${id} ${argv.join(' ')}: exit ${r.exitCode}: ${said.slice(0, 200)}`)
      }
      const required = Object.entries((command as { args?: Record<string, { required?: boolean }> }).args ?? {}).filter(([, a]) => a.required)
      if (required.length > 0) {
        const r = await runCommand(command as never, [], { CORRAL_API_URL: 'http://127.0.0.1:9', CORRAL_TOKEN: 'x' })
        if (r.exitCode !== 2) failures.push(`${id} (no arguments): exit ${r.exitCode}: ${r.stderr.slice(0, 200)}`)
      }
    }
    expect(failures).toEqual([])
  }, 120_000)
})

describe('unknown commands are usage errors', () => {
  it.each([
    [['nosuch'], undefined],
    [['task', 'lsit'], 'task list'],
    [['workspace', 'kat'], 'workspace cat'],
    [['keys', 'lsit', '--json'], 'keys list'],
    [['pack', 'uplaod', 'x.tgz'], 'pack upload'],
  ] as Array<[string[], string | undefined]>)('corral %j → exit 2, one line, the closest command suggested', async (argv, suggestion) => {
    const r = await runCorral(argv, { env: { NO_COLOR: '' } })
    expect(r.code).toBe(2)
    if (argv.includes('--json')) {
      const out = JSON.parse(r.stdout) as { error: { code: string; details?: { suggestion?: string } }; exit_code: number }
      expect(out).toMatchObject({ error: { code: 'usage_error' }, exit_code: 2 })
      expect(out.error.details?.suggestion).toBe(suggestion)
      return
    }
    expect(r.stderr.trim().split('\n')).toHaveLength(1)
    expect(r.stderr).toContain(`"${argv.join(' ')}" is not a corral command`)
    if (suggestion) expect(r.stderr).toContain(`Did you mean "${suggestion}"?`)
    expect(r.stderr).not.toContain(ESC)
  })

  // `script` gives the command a terminal on stdout (and stdin); stderr goes to a file unless asked.
  const underTerminal = (cmd: string, env: Record<string, string>, stderrToTerminal = false): { tty: string; stderr: string } => {
    const dir = tmp()
    const errFile = join(dir, 'stderr')
    const redirect = stderrToTerminal ? '' : ` 2>${errFile}`
    const tty = execFileSync('script', ['-qc', `${process.execPath} ${CORRAL_BIN} ${cmd} </dev/null${redirect}`, '/dev/null'], { env: { ...hermeticEnv(), ...env }, encoding: 'latin1' })
    return { tty, stderr: stderrToTerminal ? '' : readFileSync(errFile, 'latin1') }
  }

  it.each([
    ['nosuch'], ['task lsit'], ['help nosuch'],
  ])('corral %s with stdout on a terminal: no colour into the stderr pipe', (cmd) => {
    const { stderr } = underTerminal(cmd, {})
    expect(stderr.length).toBeGreaterThan(0)
    expect(stderr).not.toContain(ESC)
  })

  it('NO_COLOR turns colour off on a terminal too', () => {
    const { tty } = underTerminal('task lsit', { NO_COLOR: '1' }, true)
    expect(tty).toContain('is not a corral command')
    expect(tty).not.toContain(ESC)
    // …and without it, a terminal does get colour (the check above can fail).
    expect(underTerminal('task lsit', {}, true).tty).toContain(ESC)
  })
})

/** Spawns the binary, waits for the stdout line whose JSON has event "ready", then SIGTERM. */
async function readyUnderJson(args: string[], env: Record<string, string> = {}): Promise<{ ready: Record<string, unknown>; lines: string[]; code: number | null }> {
  const child = spawn(process.execPath, [CORRAL_BIN, ...args, '--json'], { env: { ...hermeticEnv(), CORRAL_LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stderr.on('data', (c) => (err += String(c)))
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)))
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setTimeout(() => (child.kill('SIGKILL'), reject(new Error(`not ready:\n${out}\n${err}`))), 60_000)
    child.stdout.on('data', (c) => {
      out += String(c)
      for (const line of out.split('\n').slice(0, -1)) {
        const v = (() => { try { return JSON.parse(line) as Record<string, unknown> } catch { return undefined } })()
        if (v?.event === 'ready') {
          clearTimeout(timer)
          resolve(v)
        }
      }
    })
    child.once('exit', (code) => (clearTimeout(timer), reject(new Error(`exited ${code} before ready:\n${out}\n${err}`))))
  })
  child.kill('SIGTERM')
  const code = await exited
  return { ready, lines: out.split('\n').filter((l) => l !== ''), code }
}

describe('long-running commands under --json', () => {
  const everyLineJson = (lines: string[]) => {
    for (const l of lines) expect(() => JSON.parse(l), l).not.toThrow()
  }

  it('serve: the admin key and the ready line are JSON objects, so is every log line', async () => {
    const dir = tmp()
    const { ready, lines, code } = await readyUnderJson(['serve', '--port', '0', '--data-dir', dir])
    expect(ready).toMatchObject({ event: 'ready', api_url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/v1$/), proxy_url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/) })
    const key = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((v) => v.event === 'admin_key_created')
    expect(key).toMatchObject({ org: 'default', key: readFileSync(join(dir, 'admin.key'), 'utf8').trim(), path: join(dir, 'admin.key') })
    everyLineJson(lines)
    expect(code).toBe(0)
  }, 90_000)

  it('proxy: the ready line is a JSON object', async () => {
    const dir = tmp()
    const { ready, lines, code } = await readyUnderJson(['proxy', '--port', '0', '--data-dir', dir])
    expect(ready).toMatchObject({ event: 'ready', proxy_url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/), workers: 1 })
    everyLineJson(lines)
    expect(code).toBe(0)
  }, 90_000)

  it('dev: the summary is one JSON object naming what it started', async () => {
    const dir = tmp()
    const { ready, lines, code } = await readyUnderJson(['dev', '--port', '0', '--data-dir', dir, '--allow-unenforced-limits', '--runtime', 'process'], { XDG_CONFIG_HOME: tmp() })
    expect(ready).toMatchObject({ event: 'ready', api_url: expect.stringMatching(/\/v1$/), console_url: expect.stringMatching(/\/$/), model_url: expect.stringMatching(/^https:/), runtime: 'process', sandboxed: false, profile: 'dev' })
    everyLineJson(lines)
    expect(code).toBe(0)
  }, 90_000)
})
