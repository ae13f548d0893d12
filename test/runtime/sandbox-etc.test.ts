import { execFile } from 'node:child_process'
import { lstatSync } from 'node:fs'
import { chmod, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bwrapArgs, nodePrefix } from '../../src/runtime/sandbox-args.js'
import { bwrapAvailable } from './helpers.js'

// The parts of the host's /etc the sandbox sees: a symlink into the bound system dirs stays a link
// (the time zone keeps its name; ICU would otherwise search zoneinfo at each process's first date).
const hasBwrap = await bwrapAvailable()
const hostLink = (() => {
  try {
    return lstatSync('/etc/localtime').isSymbolicLink()
  } catch {
    return false
  }
})()

describe.runIf(hasBwrap)('sandbox /etc', () => {
  let dataDir: string
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'corral-sandbox-etc-'))
    await chmod(dataDir, 0o777)
  })
  afterAll(async () => {
    await rm(dataDir, { recursive: true, force: true })
  })

  it('keeps /etc/localtime as the host has it, so the zone resolves by name', async () => {
    const script = `const fs = require('fs'); let link = null
      try { link = fs.lstatSync('/etc/localtime').isSymbolicLink() } catch {}
      console.log(JSON.stringify({ link, tz: Intl.DateTimeFormat().resolvedOptions().timeZone }))`
    const args = bwrapArgs({
      dataDir, init: '/dev/null', passwd: '/dev/null', group: '/dev/null', proxySocket: '/dev/null', inbox: null, ca: null,
      caBundle: null, readOnly: [nodePrefix()], hide: [], packs: [], disableUserns: true,
    }, [process.execPath, '-e', script])
    const { stdout } = await promisify(execFile)('bwrap', args, { env: { PATH: '/usr/bin:/bin' }, timeout: 20_000 })
    const inside = JSON.parse(stdout) as { link: boolean | null; tz: string }
    const { stdout: host } = await promisify(execFile)(process.execPath, ['-e', 'console.log(Intl.DateTimeFormat().resolvedOptions().timeZone)'], { env: { PATH: '/usr/bin:/bin' } })
    if (hostLink) expect(inside.link).toBe(true)
    expect(inside.tz).toBe(host.trim())
  })
})
