// The README's CLI tour, run as written against `corral dev` with the built binary: every `sh`
// block between `<!-- tour:begin -->` and `<!-- tour:end -->` is concatenated, in order, into one
// bash script (so variables carry over, as in one terminal) that must exit 0. Two things differ
// from a person at a terminal, both stated here: `corral` is a shim on PATH (the README's alias),
// and a line marked "Ctrl-C to stop" runs for 3 s under `timeout` and must still be running then.
import { spawn } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startDev, type RunningDev } from '../helpers/dev.js'
import { CORRAL_BIN, hermeticEnv } from '../helpers/serve.js'

const ROOT = resolve(import.meta.dirname, '../..')

/** The tour's command lines, in README order. */
export function tourScript(readme: string): string {
  const lines: string[] = []
  for (const [, region] of readme.matchAll(/<!-- tour:begin -->([\s\S]*?)<!-- tour:end -->/g)) {
    for (const [, block] of region!.matchAll(/```sh\n([\s\S]*?)```/g)) lines.push(...block!.split('\n'))
  }
  return lines.map((line) => {
    if (!/Ctrl-C to stop/.test(line)) return line
    const command = line.replace(/\s+#.*$/, '')
    return `timeout 3 ${command} || [ $? -eq 124 ]`
  }).join('\n')
}

describe('README tour', () => {
  let tmp: string
  let dev: RunningDev
  let env: Record<string, string>

  beforeAll(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'corral-tour-'))
    env = { XDG_CONFIG_HOME: join(tmp, 'config') }
    dev = await startDev(join(tmp, 'data'), env)
  })
  afterAll(async () => {
    await dev?.stop()
    rmSync(tmp, { recursive: true, force: true })
  })

  it('names only files that exist, and the credential the example policy injects', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
    const script = tourScript(readme)
    for (const [path] of script.matchAll(/\bexamples\/[\w./-]+/g)) expect(existsSync(join(ROOT, path.replace(/\*\.yaml$/, ''))), path).toBe(true)
    const credential = /credential create (\S+)/.exec(script)?.[1]
    expect(readFileSync(join(ROOT, 'examples/llm-provider.yaml'), 'utf8')).toContain(`credential: ${credential},`)
  })

  it('runs in order against corral dev', async () => {
    const work = join(tmp, 'work')
    const bin = join(tmp, 'bin')
    mkdirSync(work)
    mkdirSync(bin)
    symlinkSync(join(ROOT, 'examples'), join(work, 'examples'))
    writeFileSync(join(bin, 'corral'), `#!/bin/sh\nexec "${process.execPath}" "${CORRAL_BIN}" "$@"\n`)
    chmodSync(join(bin, 'corral'), 0o755)
    const script = `PS4='+ [$SECONDS s] '\nset -euo pipefail -x\n${tourScript(readFileSync(join(ROOT, 'README.md'), 'utf8'))}\n`
    const result = await new Promise<{ code: number | null; out: string }>((done) => {
      const child = spawn('bash', ['-c', script], {
        cwd: work,
        env: { ...hermeticEnv(), ...env, NO_COLOR: '1', PATH: `${bin}:${process.env.PATH}`, ANTHROPIC_API_KEY: 'sk-ant-tour-not-a-real-key' },
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      let out = ''
      child.stdout.on('data', (c) => (out += String(c)))
      child.stderr.on('data', (c) => (out += String(c)))
      child.once('close', (code) => done({ code, out }))
    })
    if (process.env.CORRAL_TEST_TOUR_LOG) writeFileSync(process.env.CORRAL_TEST_TOUR_LOG, result.out)
    expect(result.code, `${result.out.slice(-6000)}\n--- corral dev ---\n${dev.output().slice(-2000)}`).toBe(0)
    expect(existsSync(join(work, 'lint.sarif'))).toBe(true)
    expect(existsSync(join(work, 'denies.ndjson'))).toBe(true)
    // Three tasks completed (demo, follow-up, shell agent) and the fork made a second demo workspace.
    expect(result.out.match(/Task task_\S+ completed/g)?.length ?? 0).toBeGreaterThanOrEqual(3)
    const res = await fetch(`${dev.url}/v1/workspaces`, { headers: { authorization: `Bearer ${dev.adminKey}` } })
    const { workspaces } = await res.json() as { workspaces: Array<{ parent_workspace_id?: string }> }
    expect(workspaces.some((w) => w.parent_workspace_id)).toBe(true)
  }, 180_000)
})
