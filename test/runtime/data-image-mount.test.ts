// A loop mount that fails because another process took the loop device it picked (several serves
// starting on one host at once, each probing the kernel quota; workspaces provisioning) is tried
// again: the probe still finds the kernel quota usable instead of refusing serve's start. `mount`
// on PATH is a wrapper that fails its first calls the way util-linux does in that race, then runs
// the real mount on a real ext4 image (root only: loop devices).
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { DataImages } from '../../src/runtime/data-image.js'

const asRoot = process.getuid?.() === 0

describe.skipIf(!asRoot)('a loop mount that loses the race for its device', () => {
  let dir: string
  const saved = { path: process.env.PATH, counter: process.env.CORRAL_TEST_MOUNT_CALLS, fails: process.env.CORRAL_TEST_MOUNT_FAILS }
  const calls = () => Number(readFileSync(join(dir, 'calls'), 'utf8').trim())

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'corral-mount-race-'))
    const bin = join(dir, 'bin')
    writeFileSync(join(dir, 'calls'), '0')
    mkdirSync(bin)
    writeFileSync(join(bin, 'mount'), `#!/bin/sh
n=$(cat "$CORRAL_TEST_MOUNT_CALLS")
echo $((n + 1)) > "$CORRAL_TEST_MOUNT_CALLS"
if [ "$n" -lt "$CORRAL_TEST_MOUNT_FAILS" ]; then
  echo "mount: $6: cannot mount; probably corrupted filesystem on /dev/loop4." >&2
  exit 32
fi
exec /usr/bin/mount "$@"
`)
    chmodSync(join(bin, 'mount'), 0o755)
    process.env.PATH = `${bin}:${saved.path}`
    process.env.CORRAL_TEST_MOUNT_CALLS = join(dir, 'calls')
  })
  afterEach(() => {
    process.env.PATH = saved.path
    for (const [k, v] of [['CORRAL_TEST_MOUNT_CALLS', saved.counter], ['CORRAL_TEST_MOUNT_FAILS', saved.fails]] as const) {
      if (v === undefined) delete process.env[k]
      else process.env[k] = v
    }
    rmSync(dir, { recursive: true, force: true })
  })

  it('two lost tries, then the mount: the probe finds the kernel quota usable', async () => {
    process.env.CORRAL_TEST_MOUNT_FAILS = '2'
    const scratch = join(dir, 'scratch')
    expect(await DataImages.probe(scratch)).toBeUndefined()
    // The two failures and at least the mount that worked (the probe mounts more than once).
    expect(calls()).toBeGreaterThanOrEqual(3)
  })

  it('a mount that never works is reported after its tries, with mount\'s own words', async () => {
    process.env.CORRAL_TEST_MOUNT_FAILS = '1000'
    const reason = await DataImages.probe(join(dir, 'scratch'))
    expect(reason).toMatch(/^a loop-mounted ext4 image cannot be made here \(.*probably corrupted filesystem on \/dev\/loop4/)
    expect(calls()).toBe(4)
  })
})
