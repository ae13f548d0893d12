// Packs inside a workspace (docs/runtime.md "Packs") on both drivers: the content trees appear
// under $CORRAL_PACKS_DIR (/packs in the sandbox, read-only there), the agent command of a pack
// resolves inside its directory with /data as the working directory, and a pack's environment
// lies beneath corral's own variables.
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { resolvePackCommand } from '../../src/runtime/pack-mounts.js'

import type { PackMount } from '../../src/runtime/index.js'
import { bwrapAvailable } from './helpers.js'
import { localRuntime, processRuntime, type DirectoryRuntimeUnderTest } from './drivers.js'

const available = await bwrapAvailable()

// Writes report.json into its working directory: what it saw of the packs and the environment.
const AGENT = `#!/bin/sh
set -u
if touch "$CORRAL_PACK_DIR/new-file" 2>/dev/null; then w=writable; else w=readonly; fi
printf '{"packs":"%s","packs_dir":"%s","pack_dir":"%s","arg":"%s","arg_content":"%s","cwd":"%s","greeting":"%s","proxy":"%s","task_file":"%s","other":"%s","write":"%s"}\\n' \\
  "$CORRAL_PACKS" "$CORRAL_PACKS_DIR" "$CORRAL_PACK_DIR" "$1" "$(cat "$1")" "$(pwd)" "\${PACK_GREETING:-}" "\${HTTPS_PROXY:-}" \\
  "\${CORRAL_TASK_FILE:-}" "$(cat "$CORRAL_PACKS_DIR/other/readme.txt")" "$w" > report.json
`

/** Until `path` has content: a shell's `> file` creates it empty before the write lands. */
async function waitForFile(path: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await readFile(path).then((b) => b.length > 0, () => false)) return
    await new Promise((r) => setTimeout(r, 25))
  }
  throw new Error(`${path} did not appear`)
}

async function makePack(root: string, name: string, files: Record<string, { text: string; mode: number }>): Promise<PackMount> {
  const dir = join(root, name)
  for (const [path, f] of Object.entries(files)) {
    await mkdir(join(dir, path, '..'), { recursive: true })
    await writeFile(join(dir, path), f.text)
    await chmod(join(dir, path), f.mode)
  }
  return { name, dir }
}

describe('resolvePackCommand', () => {
  it('resolves a relative command with a slash and ./ arguments in the pack dir; bare names and absolute paths stay', () => {
    expect(resolvePackCommand(['bin/agent', './cfg.json', '--x', 'y/z'], '/packs/a')).toEqual(['/packs/a/bin/agent', '/packs/a/cfg.json', '--x', 'y/z'])
    expect(resolvePackCommand(['sh', './agent.sh'], '/packs/a')).toEqual(['sh', '/packs/a/agent.sh'])
    expect(resolvePackCommand(['/usr/bin/env', 'node', './main.mjs'], '/p/b')).toEqual(['/usr/bin/env', 'node', '/p/b/main.mjs'])
    expect(resolvePackCommand(['./run'], '/packs/a')).toEqual(['/packs/a/run'])
  })
})

const drivers: Array<[string, boolean, (root: string) => DirectoryRuntimeUnderTest]> = [
  ['process', true, (root) => processRuntime({ root, proxy: { host: '127.0.0.1', port: 9 }, warn: () => {}, stopGraceMs: 500 })],
  ['local', available, (root) => localRuntime({ root, proxy: { host: '127.0.0.1', port: 9 }, warn: () => {}, stopGraceMs: 500 })],
]

for (const [kind, usable, make] of drivers) {
  describe.skipIf(!usable)(`packs in a workspace (${kind} runtime)`, () => {
    let root: string
    let runtime: DirectoryRuntimeUnderTest
    let packs: PackMount[]

    beforeAll(async () => {
      // Under the host's /tmp, which the sandbox replaces with its own: only the binds show them.
      root = await mkdtemp(join(tmpdir(), 'corral-packs-rt-'))
      runtime = make(join(root, 'runtime'))
      packs = [
        await makePack(join(root, 'content'), 'shell-agent', {
          'bin/agent.sh': { text: AGENT, mode: 0o555 },
          'data.txt': { text: 'pack data', mode: 0o444 },
        }),
        await makePack(join(root, 'content'), 'other', { 'readme.txt': { text: 'other pack', mode: 0o444 } }),
      ]
    })

    afterAll(async () => {
      await runtime?.close()
      await chmod(join(root, 'content', 'shell-agent', 'bin'), 0o755).catch(() => {})
      await rm(root, { recursive: true, force: true })
    })

    it('mounts every pack, runs the pack\'s command in /data, and keeps corral\'s variables over the pack\'s', async () => {
      const ws = await runtime.provision({ workspaceId: `ws_packs_${randomUUID().slice(0, 8)}` })
      const agent = await runtime.startAgent(ws.workspaceId, {
        command: ['bin/agent.sh', './data.txt'],
        commandPack: 'shell-agent',
        packs,
        proxyToken: 'cap_pack_token',
        baseEnv: { PACK_GREETING: 'hello', HTTPS_PROXY: 'http://evil.example:1', CORRAL_TASK_FILE: '/etc/passwd' },
      })
      expect(await agent.exited).toEqual({ code: 0, signal: null })
      const report = JSON.parse(await readFile(join(ws.dataDir, 'report.json'), 'utf8'))
      const packsDir = kind === 'local' ? '/packs' : join(root, 'runtime', 'workspaces', ws.workspaceId, 'packs')
      expect(report).toMatchObject({
        packs: 'shell-agent,other',
        packs_dir: packsDir,
        pack_dir: `${packsDir}/shell-agent`,
        arg: `${packsDir}/shell-agent/data.txt`,
        arg_content: 'pack data',
        cwd: kind === 'local' ? '/data' : ws.dataDir,
        greeting: 'hello',
        task_file: '',
        other: 'other pack',
      })
      expect(report.proxy).not.toContain('evil')
      expect(report.proxy).toContain('cap_pack_token')
      // The sandbox binds packs read-only (the process driver cannot enforce it).
      if (kind === 'local') expect(report.write).toBe('readonly')
    })

    // Only the sandbox has a host-side launcher whose environment matters.
    if (kind === 'local') it('hands the pack\'s environment to the sandbox only, never to bwrap on the host', async () => {
      const ws = await runtime.provision({ workspaceId: `ws_packs_${randomUUID().slice(0, 8)}` })
      const agent = await runtime.startAgent(ws.workspaceId, {
        command: ['sh', '-c', 'printf %s "$PACK_GREETING|$LD_PRELOAD" > env.txt; sleep 30'],
        packs,
        proxyToken: 't',
        baseEnv: { PACK_GREETING: 'hello', LD_PRELOAD: join(packs[0]!.dir, 'evil.so') },
      })
      try {
        await waitForFile(join(ws.dataDir, 'env.txt'))
        expect(await readFile(join(ws.dataDir, 'env.txt'), 'utf8')).toBe(`hello|${join(packs[0]!.dir, 'evil.so')}`)
        // agent.pid is bwrap's own process on the host.
        const hostEnv = (await readFile(`/proc/${agent.pid}/environ`, 'utf8')).split('\0')
        expect(hostEnv.some((e) => e.startsWith('LD_PRELOAD=') || e.startsWith('PACK_GREETING='))).toBe(false)
      } finally {
        await runtime.stopAgent(ws.workspaceId)
      }
    })

    // The dynamic loader writes LD_DEBUG output of each program it loads to LD_DEBUG_OUTPUT.<pid>:
    // a program that got the pack's variables leaves a file naming itself.
    if (kind === 'local') it('gives the pack\'s environment to the agent only, never to prlimit or the init (they run before the limits apply or hold them)', async () => {
      const ws = await runtime.provision({ workspaceId: `ws_packs_${randomUUID().slice(0, 8)}` })
      await runtime.startAgent(ws.workspaceId, {
        command: ['sh', '-c', '/bin/true; printf %s "$LD_DEBUG" > env.txt; sleep 30'],
        packs,
        proxyToken: 't',
        baseEnv: { LD_DEBUG: 'files', LD_DEBUG_OUTPUT: '/data/ld' },
      })
      try {
        await waitForFile(join(ws.dataDir, 'env.txt'))
        expect(await readFile(join(ws.dataDir, 'env.txt'), 'utf8')).toBe('files')
        const logs = (await readdir(ws.dataDir)).filter((n) => n.startsWith('ld.'))
        const programs = await Promise.all(logs.map((n) => readFile(join(ws.dataDir, n), 'utf8')))
        // The agent's own programs did get it (sh, /bin/true): the check below is not vacuous.
        expect(programs.some((text) => /needed by \/(usr\/)?bin\/(true|sh|dash)/.test(text) || /file=.*\[0\];\s+needed by .*true/.test(text))).toBe(true)
        for (const text of programs) {
          expect(text).not.toMatch(/prlimit/)
          expect(text).not.toContain(process.execPath)
        }
      } finally {
        await runtime.stopAgent(ws.workspaceId)
      }
    })

    it('refuses a command pack that is not mounted and pack names that are not plain names', async () => {
      const ws = await runtime.provision({ workspaceId: `ws_packs_${randomUUID().slice(0, 8)}` })
      await expect(runtime.startAgent(ws.workspaceId, { command: ['bin/agent.sh'], commandPack: 'missing', packs, proxyToken: 't' }))
        .rejects.toThrow(/pack missing is not mounted/)
      await expect(runtime.startAgent(ws.workspaceId, { command: ['true'], packs: [{ name: '../etc', dir: packs[0]!.dir }], proxyToken: 't' }))
        .rejects.toThrow(/invalid pack name/)
    })
  })
}
