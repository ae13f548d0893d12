// Issue 15 class 7: the sandbox's limits hold when serve runs as root (docs/security.md "The
// sandbox's limits hold as root"). Observed before: as root the process limit was not enforced
// (the kernel exempts root from RLIMIT_NPROC, and the sandbox's uid mapped to root), memory was
// limited per process (RLIMIT_DATA) so many processes together took any amount, and /tmp (RAM)
// grew past the workspace's memory without refusal. Real bubblewrap sandboxes, real cgroups, real
// agents; bounded by the limits themselves, never by timing.
import { execFileSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { detectCgroups } from '../../src/runtime/cgroups.js'
import { DEFAULT_SANDBOX_UID } from '../../src/runtime/local-runtime.js'
import type { WorkspaceLimits } from '../../src/runtime/limits.js'
import { testDialects } from '../helpers/dialects.js'
import { controllerRig, waitFor, type ControllerRig } from '../workspaces/harness.js'
import { bwrapAvailable } from '../runtime/helpers.js'
import { localRuntime, type LocalRuntimeUnderTest } from '../runtime/drivers.js'

const available = (await bwrapAvailable()) && (await detectCgroups()).driver !== null
const asRoot = process.getuid?.() === 0
// CI runs as root with bubblewrap required: there the limits must be proven, never skipped.
if (!available && asRoot && process.env.CORRAL_TEST_REQUIRE_BWRAP === '1') {
  throw new Error('the workspace-limit attacks need bubblewrap and a writable cgroup hierarchy (CORRAL_TEST_REQUIRE_BWRAP=1, running as root)')
}
const MIB = 1024 * 1024
const LIMITS: WorkspaceLimits = { memoryMb: 128, pids: 48, cpus: 0, diskMb: 0, openFiles: 1024 }

/** Host processes of the sandbox uid (none may outlive their workspace). */
function processesOf(uid: number): number {
  try {
    return Number(execFileSync('pgrep', ['-c', '-u', String(uid)], { encoding: 'utf8' }).trim())
  } catch {
    return 0 // pgrep exits 1 when nothing matches
  }
}

describe.skipIf(!available)('workspace limits as the kernel enforces them (bubblewrap + cgroups)', () => {
  let root: string
  let runtime: LocalRuntimeUnderTest
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'corral-sandbox-limits-'))
    runtime = localRuntime({ root, proxy: { host: '127.0.0.1', port: 1 }, warn: () => {}, stopGraceMs: 500, limits: LIMITS })
    expect(await runtime.check()).toEqual({ ok: true, problems: [], warnings: [], fatal: [] })
  })
  afterAll(async () => {
    await runtime.close()
    await rm(root, { recursive: true, force: true })
  })

  async function run(script: string) {
    const ws = await runtime.provision({ workspaceId: `ws_lim_${randomUUID().slice(0, 8)}` })
    writeFileSync(join(ws.dataDir, 'attack.sh'), script)
    const agent = await runtime.startAgent(ws.workspaceId, { command: ['/bin/sh', '/data/attack.sh'], proxyToken: 't' })
    const exit = await agent.exited
    return { exit, dataDir: ws.dataDir, log: readFileSync(agent.logPath, 'utf8') }
  }

  it.skipIf(!asRoot)('as root, the agent is an unprivileged host uid that owns /data, holds no capability and cannot open a user namespace', async () => {
    const { exit, dataDir } = await run([
      'id -u > /data/uid',
      'grep CapEff /proc/self/status > /data/caps',
      'if unshare -U -r true 2>/dev/null; then echo yes; else echo no; fi > /data/userns',
      'touch /tmp/t && echo ok > /data/tmp',
    ].join('\n'))
    expect(exit).toEqual({ code: 0, signal: null })
    expect(readFileSync(join(dataDir, 'uid'), 'utf8').trim()).toBe(String(DEFAULT_SANDBOX_UID))
    expect(statSync(join(dataDir, 'uid')).uid).toBe(DEFAULT_SANDBOX_UID)
    expect(readFileSync(join(dataDir, 'caps'), 'utf8')).toMatch(/CapEff:\s+0+\s*$/)
    expect(readFileSync(join(dataDir, 'userns'), 'utf8').trim()).toBe('no')
    expect(readFileSync(join(dataDir, 'tmp'), 'utf8').trim()).toBe('ok')
  })

  it('a fork bomb stops at the pids limit; nothing of it outlives the workspace', async () => {
    // Each shell starts two more: unbounded but for the limit. The shells give up when a fork fails.
    const { exit } = await run('b() { b & b & wait; }; b; echo after > /data/after')
    expect(exit.limitHit).toBe('pids')
    if (asRoot) expect(processesOf(DEFAULT_SANDBOX_UID)).toBe(0)
  })

  it('memory held in many processes, each under the limit, is stopped at the workspace limit', async () => {
    // Four node processes of 60 MiB each: every one alone fits the 128 MiB, together they do not.
    const hold = `node -e "const a=[]; for (let i = 0; i < 60; i++) a.push(Buffer.alloc(${MIB}, 1)); require('fs').writeFileSync('/data/held-' + process.pid, '1'); setTimeout(() => {}, 3000)"`
    const { exit, dataDir } = await run(`for i in 1 2 3 4; do ${hold} & done; wait`)
    expect(exit.limitHit).toBe('memory')
    // Not all four got to hold their share at once.
    const held = readdirSync(dataDir).filter((n) => n.startsWith('held-'))
    expect(held.length).toBeLessThan(4)
  })

  it('/tmp cannot grow past the workspace memory: the write is refused or the writer killed', async () => {
    const { exit, dataDir } = await run('dd if=/dev/zero of=/tmp/big bs=1M count=300 2> /data/dd.err; ls -l /tmp/big | awk \'{print $5}\' > /data/size')
    const size = existsSync(join(dataDir, 'size')) ? Number(readFileSync(join(dataDir, 'size'), 'utf8').trim() || 0) : 0
    expect(size).toBeLessThanOrEqual(LIMITS.memoryMb * MIB)
    const refused = existsSync(join(dataDir, 'dd.err')) && /No space left/.test(readFileSync(join(dataDir, 'dd.err'), 'utf8'))
    expect(refused || exit.limitHit === 'memory').toBe(true)
  })

  it('/tmp and the processes share one budget: 100 MiB in /tmp leaves no room for 60 MiB more', async () => {
    const { exit, dataDir } = await run([
      'dd if=/dev/zero of=/tmp/big bs=1M count=100 2>/dev/null',
      `node -e "const a=[]; for (let i = 0; i < 60; i++) a.push(Buffer.alloc(${MIB}, 1)); require('fs').writeFileSync('/data/allocated', '1')"`,
      'true',
    ].join('\n'))
    expect(exit.limitHit).toBe('memory')
    expect(existsSync(join(dataDir, 'allocated'))).toBe(false)
  })
})

// Through the controller: the task fails with a reason that says which limit, and the workspace
// (and the process hosting the controller, as serve would) goes on to the next task.
for (const dialect of testDialects()) {
  describe.skipIf(!available)(`${dialect.name}: a task whose agent hits a workspace limit`, () => {
    let rig: ControllerRig | undefined
    afterEach(async () => {
      await rig?.close()
      rig = undefined
    })

    it('fails with pids_limit_exceeded / memory_limit_exceeded and a plain summary; the next task runs', async () => {
      // A stand-in agent that does what its task's description says.
      const agent = String.raw`
        d=$(cat "$CORRAL_INBOX/tasks.json"); case "$d" in
          *forkbomb*) b() { b & b & wait; }; b ;;
          *survive*) exec node -e "const { spawn } = require('child_process'), fs = require('fs')
            for (let i = 0; i < 100; i++) spawn('sleep', ['1']).on('error', () => {})
            setTimeout(() => fs.writeFileSync('/data/bombed', '1'), 300)
            setInterval(() => fs.existsSync('/data/go') && process.exit(0), 50)" ;;
          *memory*) for i in 1 2 3 4; do node -e "const a=[]; for (let i = 0; i < 60; i++) a.push(Buffer.alloc(1<<20, 1)); setTimeout(() => {}, 3000)" & done; wait ;;
          *) echo fine > /data/fine ;;
        esac`
      rig = await controllerRig(await dialect.open(), {
        agentCommand: ['/bin/sh', '-c', agent],
        runtime: (dir) => localRuntime({ root: dir, proxy: { host: '127.0.0.1', port: 9 }, warn: () => {}, stopGraceMs: 500, limits: LIMITS }),
      })
      const r = rig
      const { workspace, task } = await r.controller.createWorkspace(r.orgId, r.actor, r.role, { description: 'forkbomb', options: {} })
      const settled = (id: string) => waitFor(async () => {
        const t = await r.store.workspaces.tasks.byId(id)
        return t && !['submitted', 'running'].includes(t.status) ? t : undefined
      }, `task ${id}`, 60_000)
      expect(await settled(task!.id)).toMatchObject({ status: 'failed', reason: 'pids_limit_exceeded', summary: expect.stringMatching(/process limit \(CORRAL_WORKSPACE_PIDS\)/) })
      await waitFor(async () => (await r.store.workspaces.byId(workspace.id))?.state === 'idle' || undefined, 'idle')
      const mem = await r.controller.submitTask(r.orgId, r.actor, workspace.id, { description: 'memory', options: {} })
      expect(await settled(mem.id)).toMatchObject({ status: 'failed', reason: 'memory_limit_exceeded', summary: expect.stringMatching(/memory limit/) })
      await waitFor(async () => (await r.store.workspaces.byId(workspace.id))?.state === 'idle' || undefined, 'idle')
      // An agent that survives the limit (its spawns fail, it goes on) and reports `completed`:
      // the task still fails for the limit, keeping what the agent said.
      const survive = await r.controller.submitTask(r.orgId, r.actor, workspace.id, { description: 'survive', options: {} })
      const dataDir = (await r.runtime.provision({ workspaceId: workspace.id })).dataDir
      await waitFor(async () => existsSync(join(dataDir, 'bombed')), 'the agent past its spawns')
      await r.events.handle({ org_id: r.orgId, workspace_id: workspace.id, task_id: survive.id, exp: 0 }, 'POST', `/task/${survive.id}/event`,
        Buffer.from(JSON.stringify({ type: 'task_end', status: 'completed', summary: 'all fine here' })))
      writeFileSync(join(dataDir, 'go'), '')
      expect(await settled(survive.id)).toMatchObject({ status: 'failed', reason: 'pids_limit_exceeded', summary: expect.stringMatching(/process limit.*The agent reported: all fine here$/) })
      await waitFor(async () => (await r.store.workspaces.byId(workspace.id))?.state === 'idle' || undefined, 'idle')
      const fine = await r.controller.submitTask(r.orgId, r.actor, workspace.id, { description: 'plain', options: {} })
      expect(await settled(fine.id)).toMatchObject({ status: 'failed', reason: 'agent_exited' }) // exits without task_end, limits untouched
      expect(readFileSync(join((await r.runtime.provision({ workspaceId: workspace.id })).dataDir, 'fine'), 'utf8')).toBe('fine\n')
    }, 120_000)
  })
}
