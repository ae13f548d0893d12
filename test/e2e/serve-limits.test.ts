// A configured workspace limit that cannot be enforced on the host stops `corral serve` at start:
// a clear error and a non-zero exit, never a warning and a silent pass; the operator's explicit
// opt-out starts it with the warning (docs/runtime.md "Resource limits"). The real binary, with a
// PATH that lacks `du`, the one tool the host-side disk quota cannot do without.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { CORRAL_BIN, hermeticEnv, startServe } from '../helpers/serve.js'

const bin = mkdtempSync(join(tmpdir(), 'corral-path-'))
for (const tool of ['bwrap', 'tar', 'prlimit', 'setpriv', 'sh', 'timeout', 'sleep', 'true']) {
  const found = spawnSync('/bin/sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim()
  if (found) symlinkSync(found, join(bin, tool))
}
const env = { PATH: bin, CORRAL_RUNTIME: 'process', CORRAL_WORKSPACE_DISK_MB: '100' }

describe('serve refuses to start over a limit it cannot enforce', () => {
  afterAll(() => rmSync(bin, { recursive: true, force: true }))

  it('exits non-zero naming the limit, what is missing and the opt-out', () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'corral-serve-limits-'))
    try {
      const run = spawnSync(process.execPath, [CORRAL_BIN, 'serve', '--port', '0', '--data-dir', dataDir], {
        env: { ...hermeticEnv(), CORRAL_LOG_LEVEL: 'warn', NO_COLOR: '1', ...env }, encoding: 'utf8', timeout: 30_000,
      })
      expect(run.status).not.toBe(0)
      expect(run.stdout + run.stderr).toMatch(/workspace limits cannot be enforced here: du \(GNU coreutils\) is not installed.*CORRAL_WORKSPACE_DISK_MB.*--allow-unenforced-limits/)
      expect(run.stdout).not.toMatch(/corral ready/)
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  })

  it('starts with --allow-unenforced-limits, saying what is not enforced', async () => {
    const serve = await startServe({ env, args: ['--allow-unenforced-limits'] })
    try {
      expect(serve.output()).toMatch(/du \(GNU coreutils\) is not installed.*started anyway/)
    } finally {
      await serve.stop()
    }
  })
})
