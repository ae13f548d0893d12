// The agent-output shipper (src/workspaces/log-shipper.ts): what reaches the store is redacted
// whatever the chunking, and a line longer than a chunk is still stored whole, in order; an agent
// whose output streams (Kubernetes) is shipped once, also when the same process is adopted again.
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { AgentProcess } from '../../src/runtime/index.js'
import type { WorkspaceLogs } from '../../src/store/index.js'
import { AgentLauncher } from '../../src/workspaces/launcher.js'
import { shipAgentLog } from '../../src/workspaces/log-shipper.js'

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})

function collecting(): { logs: WorkspaceLogs; chunks: string[] } {
  const chunks: string[] = []
  const logs: WorkspaceLogs = {
    append: async (_ws, text) => chunks.push(text),
    read: async () => ({ chunks: [], truncated: false }),
  }
  return { logs, chunks }
}

describe('agent output shipper', () => {
  it('redacts a token that straddles a chunk boundary of a line longer than a chunk', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'corral-shipper-'))
    dirs.push(dir)
    const logPath = join(dir, 'agent.log')
    writeFileSync(logPath, '')
    const jwt = `eyJ${'a'.repeat(40)}.eyJ${'b'.repeat(40)}.${'c'.repeat(43)}`
    // The token starts 20 characters before the 64 KiB chunk boundary.
    const line = 'x'.repeat(64 * 1024 - 20) + jwt + ' ' + 'y'.repeat(100) + '\n'
    let exit!: () => void
    const proc = { workspaceId: 'ws_1', pid: 1, logPath, exited: new Promise<never>((r) => (exit = r as () => void)) } as unknown as AgentProcess
    const { logs, chunks } = collecting()
    const shipping = shipAgentLog({ logs, intervalMs: 5 }, proc, 0)
    appendFileSync(logPath, line)
    exit()
    await shipping
    const stored = chunks.join("")
    expect(stored).toBe(line.replace(jwt, '[redacted]'))
    for (const c of chunks) expect(c).not.toMatch(/eyJa{4}|b{40}|c{43}/)
  })

  it('an agent whose output streams is shipped once by its launcher, even when the same process is adopted again', async () => {
    let exit!: () => void
    const exited = new Promise<never>((r) => (exit = r as () => void))
    async function* output(): AsyncGenerator<string> {
      yield 'one\n'
      await exited
      yield 'two\n'
    }
    const proc = { workspaceId: 'ws_1', pid: 0, logPath: 'pod/corral/p/agent', exited, output } as unknown as AgentProcess
    const { logs, chunks } = collecting()
    const runtime = { capabilities: { hostLogs: { agentLogPath: () => proc.logPath } }, startAgent: async () => proc } as never
    const launcher = new AgentLauncher({ runtime, workspaces: {} as never, agentCommand: ['agent'], logs })
    await launcher.start({ id: 'ws_1', org_id: 'org_1' } as never, undefined, 'tok')
    launcher.follow(proc)
    exit()
    for (let i = 0; i < 100 && chunks.join('') !== 'one\ntwo\n'; i++) await new Promise((r) => setTimeout(r, 20))
    await new Promise((r) => setTimeout(r, 300)) // a second shipper would store its copy within a pass (250 ms)
    expect(chunks.join('')).toBe('one\ntwo\n')
  })
})
