// An agent CLI inside a workspace (docs/agent.md "Agent kinds") on both drivers: the runtime names
// the CLI's executable in CORRAL_AGENT_CLI (inside the sandbox: its package bound read-only at
// /run/corral/agent-cli) and how to run it in CORRAL_AGENT_CLI_RUN; locateAgentCli finds a CLI in
// the extra node_modules folders before corral's own.
import { randomUUID } from 'node:crypto'
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AGENT_CLIS } from '../../src/contract/index.js'
import { agentCliDirsFromEnv, locateAgentCli, type AgentCliMount } from '../../src/runtime/index.js'
import { localRuntime, processRuntime, type DirectoryRuntimeUnderTest } from './drivers.js'
import { bwrapAvailable } from './helpers.js'

const available = await bwrapAvailable()

describe('locateAgentCli', () => {
  let modules: string
  beforeAll(async () => {
    modules = await mkdtemp(join(tmpdir(), 'corral-cli-modules-'))
  })
  afterAll(() => rm(modules, { recursive: true, force: true }))

  it('finds a CLI in an extra node_modules folder first, with its entry and how to run it', async () => {
    const cli = AGENT_CLIS['gemini-cli']
    await mkdir(join(modules, cli.package, 'bundle'), { recursive: true })
    await writeFile(join(modules, cli.package, cli.entry), '// a stand-in\n')
    expect(locateAgentCli('gemini-cli', [join(modules, 'missing'), modules])).toEqual({ kind: 'gemini-cli', dir: join(modules, cli.package), entry: 'bundle/gemini.js', run: 'node' })
  })

  it('reads the extra folders from CORRAL_AGENT_CLI_DIR (colon-separated)', () => {
    expect(agentCliDirsFromEnv({ CORRAL_AGENT_CLI_DIR: '/a/node_modules::/b/node_modules' })).toEqual(['/a/node_modules', '/b/node_modules'])
    expect(agentCliDirsFromEnv({})).toEqual([])
  })
})

// Reports where the CLI is and whether its directory can be written, then exits.
const PROBE = `if touch "$(dirname "$CORRAL_AGENT_CLI")/new-file" 2>/dev/null; then w=writable; else w=readonly; fi
printf '{"cli":"%s","run":"%s","content":"%s","write":"%s"}' "$CORRAL_AGENT_CLI" "$CORRAL_AGENT_CLI_RUN" "$(cat "$CORRAL_AGENT_CLI")" "$w" > report.json`

const drivers: Array<[string, boolean, (root: string) => DirectoryRuntimeUnderTest]> = [
  ['process', true, (root) => processRuntime({ root, proxy: { host: '127.0.0.1', port: 9 }, warn: () => {}, stopGraceMs: 500 })],
  ['local', available, (root) => localRuntime({ root, proxy: { host: '127.0.0.1', port: 9 }, warn: () => {}, stopGraceMs: 500 })],
]

for (const [kind, usable, make] of drivers) {
  describe.skipIf(!usable)(`an agent CLI in a workspace (${kind} runtime)`, () => {
    let root: string
    let runtime: DirectoryRuntimeUnderTest
    let cli: AgentCliMount

    beforeAll(async () => {
      // Under the host's /tmp, which the sandbox replaces with its own: only the bind shows it.
      root = await mkdtemp(join(tmpdir(), 'corral-cli-rt-'))
      runtime = make(join(root, 'runtime'))
      const dir = join(root, 'package')
      await mkdir(join(dir, 'bin'), { recursive: true })
      await writeFile(join(dir, 'bin', 'cli'), 'the cli')
      await chmod(dir, 0o755)
      cli = { kind: 'opencode', dir, entry: 'bin/cli', run: 'native' }
    })
    afterAll(async () => {
      await runtime?.close()
      await rm(root, { recursive: true, force: true })
    })

    it('names the CLI in CORRAL_AGENT_CLI; the sandbox binds its package read-only at /run/corral/agent-cli', async () => {
      const ws = await runtime.provision({ workspaceId: `ws_cli_${randomUUID().slice(0, 8)}` })
      const agent = await runtime.startAgent(ws.workspaceId, { command: ['sh', '-c', PROBE], proxyToken: 't', cli })
      expect(await agent.exited).toEqual({ code: 0, signal: null })
      const report = JSON.parse(await readFile(join(ws.dataDir, 'report.json'), 'utf8'))
      expect(report).toMatchObject({ cli: kind === 'local' ? '/run/corral/agent-cli/bin/cli' : join(cli.dir, 'bin/cli'), run: 'native', content: 'the cli' })
      // The process driver cannot make anything read-only.
      if (kind === 'local') expect(report.write).toBe('readonly')
    })
  })
}
