import { execFile } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { chmod, chown, mkdir, mkdtemp, readFile, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { packageRoot } from '../../src/runtime/layout.js'
import {
  DEFAULT_LIMITS, findPrlimit, LIMIT_ENV, limitsEnv, limitsFromEnv, prlimitArgs, withLimits, type WorkspaceLimits,
} from '../../src/runtime/limits.js'
import { bwrapArgs, nodePrefix } from '../../src/runtime/sandbox-args.js'
import { bwrapAvailable } from './helpers.js'
import { localRuntime, type LocalRuntimeUnderTest } from './drivers.js'

describe('workspace limits configuration', () => {
  it('defaults when unset or empty, 0 for none, fractional CPUs', () => {
    expect(limitsFromEnv({})).toEqual(DEFAULT_LIMITS)
    expect(limitsFromEnv({ [LIMIT_ENV.memoryMb]: '', [LIMIT_ENV.pids]: ' 64 ', [LIMIT_ENV.cpus]: '0.5', [LIMIT_ENV.diskMb]: '0' }))
      .toEqual({ ...DEFAULT_LIMITS, pids: 64, cpus: 0.5, diskMb: 0 })
  })

  it('names every bad value at once', () => {
    expect(() => limitsFromEnv({ [LIMIT_ENV.memoryMb]: '1.5', [LIMIT_ENV.pids]: '-1', [LIMIT_ENV.cpus]: 'many', [LIMIT_ENV.openFiles]: '4096' }))
      .toThrow(/CORRAL_WORKSPACE_MEMORY_MB must be a whole number.*"1\.5".*CORRAL_WORKSPACE_PIDS must be a whole number.*"-1".*CORRAL_WORKSPACE_CPUS must be a number.*"many"/)
  })

  it('turns the limits into prlimit options, soft and hard alike, leaving out those that are 0', () => {
    const limits: WorkspaceLimits = { memoryMb: 256, pids: 50, cpus: 2, diskMb: 0, openFiles: 1024 }
    expect(prlimitArgs(limits)).toEqual([`--data=${256 * 1024 * 1024}`, '--nproc=50', '--nofile=1024'])
    expect(withLimits('/usr/bin/prlimit', limits, ['node', 'init.mjs'])).toEqual(['/usr/bin/prlimit', ...prlimitArgs(limits), '--', 'node', 'init.mjs'])
    const none = { memoryMb: 0, pids: 0, cpus: 0, diskMb: 0, openFiles: 0 }
    expect(withLimits(null, none, ['node'])).toEqual(['node'])
    expect(() => withLimits(null, limits, ['node'])).toThrow(/prlimit \(util-linux\) is needed/)
  })

  it('tells the agent its disk quota', () => {
    expect(limitsEnv({ ...DEFAULT_LIMITS, diskMb: 5 })).toEqual({ CORRAL_WORKSPACE_DISK_MB: '5' })
    expect(limitsEnv({ ...DEFAULT_LIMITS, diskMb: 0 })).toEqual({})
  })
})

const available = await bwrapAvailable()
const asRoot = process.getuid?.() === 0

// Real bubblewrap sandboxes under real rlimits. The proxy is never used by these agents.
describe.skipIf(!available)('workspace limits in the bubblewrap sandbox', () => {
  let root: string
  beforeAll(async () => {
    await mkdir(join(packageRoot(), '.corral'), { recursive: true })
    root = await mkdtemp(join(packageRoot(), '.corral', 'test-limits-'))
  })
  afterAll(async () => {
    await rm(root, { recursive: true, force: true })
  })

  const runtimeWith = (limits: WorkspaceLimits): LocalRuntimeUnderTest =>
    localRuntime({ root, proxy: { host: '127.0.0.1', port: 1 }, stopGraceMs: 1000, warn: () => {}, limits })

  async function runIn(runtime: LocalRuntimeUnderTest, command: string[]) {
    const ws = await runtime.provision({ workspaceId: `ws_lim_${randomUUID().slice(0, 8)}` })
    const agent = await runtime.startAgent(ws.workspaceId, { command, proxyToken: 't' })
    const exit = await agent.exited
    return { exit, dataDir: ws.dataDir, log: await readFile(agent.logPath, 'utf8') }
  }

  it('the start-up check passes with the defaults: cgroups enforce memory, pids and CPU here', async () => {
    expect(await runtimeWith({ ...DEFAULT_LIMITS, cpus: 1.5 }).check()).toMatchObject({ ok: true, problems: [], warnings: [], fatal: [] })
  })

  it('without cgroups, the whole-workspace limits refuse the start (fatal), unless the operator opts out', async () => {
    const detectCgroups = async () => ({ driver: null, reason: 'no cgroups in this test' })
    const make = (allowUnenforcedLimits: boolean) => localRuntime({
      root, proxy: { host: '127.0.0.1', port: 1 }, warn: () => {}, limits: { ...DEFAULT_LIMITS, cpus: 1 }, detectCgroups, allowUnenforcedLimits,
    })
    const refused = await make(false).check()
    expect(refused).toMatchObject({ ok: true, problems: [] })
    const expected = [
      /^CORRAL_WORKSPACE_CPUS=1 cannot be enforced: .*no cgroups in this test/,
      /^CORRAL_WORKSPACE_MEMORY_MB=2048 cannot be enforced for the whole workspace: .*no cgroups in this test/,
      // An unprivileged serve falls back to RLIMIT_NPROC in the sandbox's user namespace (tried for real).
      ...(asRoot ? [/^CORRAL_WORKSPACE_PIDS=1024 cannot be enforced per workspace: .*same uid/] : []),
    ]
    expect(refused.fatal).toEqual(expected.map((re) => expect.stringMatching(new RegExp(`${re.source}.*--allow-unenforced-limits`))))
    const allowed = await make(true).check()
    expect(allowed.fatal).toEqual([])
    expect(allowed.warnings).toEqual(expected.map((re) => expect.stringMatching(new RegExp(`${re.source}.*started anyway`))))
  })

  it('the start-up check refuses limits under which node cannot start', async () => {
    const check = await runtimeWith({ ...DEFAULT_LIMITS, memoryMb: 16 }).check()
    expect(check.ok).toBe(false)
    expect(check.problems).toEqual([expect.stringMatching(/^node does not start under the workspace limits .*raise CORRAL_WORKSPACE_MEMORY_MB/)])
  }, 40_000)

  it('an agent that grows past the memory limit is stopped; the same agent within it runs to the end', async () => {
    const runtime = runtimeWith({ ...DEFAULT_LIMITS, memoryMb: 192 })
    // Holds about `mb` megabytes of live arrays on the JS heap (1 MB each), then reports.
    const grow = (mb: number): string[] => [process.execPath, '-e',
      `const a = []; for (let i = 0; i < ${mb}; i++) a.push(new Array(131_072).fill(i)); require('fs').writeFileSync('/data/done', String(a.length))`]
    const within = await runIn(runtime, grow(40))
    expect(within.exit).toEqual({ code: 0, signal: null })
    expect(await readFile(join(within.dataDir, 'done'), 'utf8')).toBe('40')
    const over = await runIn(runtime, grow(1024))
    expect(over.exit.code).not.toBe(0)
    expect(over.log).toMatch(/bad_alloc|out of memory|allocation failed/i)
    await expect(stat(join(over.dataDir, 'done'))).rejects.toMatchObject({ code: 'ENOENT' })
  })

  it('a file cannot grow past the disk limit, and the agent is told the quota', async () => {
    const runtime = runtimeWith({ ...DEFAULT_LIMITS, diskMb: 1, openFiles: 256 })
    const { exit, dataDir } = await runIn(runtime, ['/bin/sh', '-c', [
      'echo "$CORRAL_WORKSPACE_DISK_MB $(ulimit -n)" > /data/seen',
      'head -c 3000000 /dev/zero > /data/big; echo $? > /data/rc',
    ].join('; ')])
    expect(exit).toEqual({ code: 0, signal: null })
    expect((await readFile(join(dataDir, 'seen'), 'utf8')).trim()).toBe('1 256')
    // head is killed by SIGXFSZ (128 + 25) at the 1 MiB mark.
    expect((await readFile(join(dataDir, 'rc'), 'utf8')).trim()).toBe('153')
    expect((await stat(join(dataDir, 'big'))).size).toBe(1024 * 1024)
  })

  it('the process limit holds a sandbox of an unprivileged user to its own count', async () => {
    // The sandbox argv the runtime builds (bwrapArgs + withLimits), started by an unprivileged host
    // user: root's processes are exempt from RLIMIT_NPROC, so under root the test switches to
    // nobody (setpriv), as corral serve would run in production.
    const dataDir = await mkdtemp(join(tmpdir(), 'corral-limits-pids-'))
    await chmod(dataDir, 0o777)
    if (asRoot) await chown(dataDir, 65534, 65534)
    const prlimit = await findPrlimit()
    // node survives a failed fork (EAGAIN as an 'error' event) where a shell would give up.
    const script = `const { spawn } = require('child_process'); let ok = 0, done = 0
      const end = () => { if (++done === 40) { require('fs').writeFileSync('/data/count', String(ok)); process.exit(0) } }
      for (let i = 0; i < 40; i++) { const c = spawn('sleep', ['5']); c.on('spawn', () => { ok++; end() }); c.on('error', end) }`
    const started = async (pids: number): Promise<number> => {
      const args = bwrapArgs({
        dataDir, init: '/dev/null', passwd: '/dev/null', group: '/dev/null', proxySocket: '/dev/null', inbox: null, ca: null,
        caBundle: null, readOnly: [nodePrefix()], hide: [], packs: [], disableUserns: true,
      }, withLimits(prlimit, { ...DEFAULT_LIMITS, pids }, [process.execPath, '-e', script]))
      const [file, argv] = asRoot ? ['setpriv', ['--reuid', '65534', '--regid', '65534', '--clear-groups', 'bwrap', ...args]] : ['bwrap', args]
      await promisify(execFile)(file, argv, { env: { PATH: '/usr/bin:/bin' }, timeout: 20_000 })
      return Number(await readFile(join(dataDir, 'count'), 'utf8'))
    }
    try {
      expect(await started(0)).toBe(40)
      // node's own threads count too: of 32, some go to it, the rest to sleeps.
      const limited = await started(32)
      expect(limited).toBeGreaterThan(0)
      expect(limited).toBeLessThan(32)
    } finally {
      await rm(dataDir, { recursive: true, force: true })
    }
  })
})
