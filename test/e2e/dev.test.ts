// Issue 12's first five minutes, on the built binary from a clean data dir: `corral dev` starts
// serve with the scripted fake model and seeds the demo; one `corral task submit --role demo …
// --wait` (through the profile dev saved, no token given) shows the agent writing a file under
// the policy, with its policy_decision rows, debits and agent events. A second start on the same
// data dir says it is already running; a restart re-seeds in place.
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startDev, type RunningDev } from '../helpers/dev.js'
import { runCorral } from '../helpers/serve.js'

describe('corral dev', () => {
  let tmp: string
  let dataDir: string
  let env: Record<string, string>
  let dev: RunningDev
  const api = async (path: string) => {
    const res = await fetch(`${dev.url}/v1${path}`, { headers: { authorization: `Bearer ${dev.adminKey}` } })
    return await res.json() as any
  }

  beforeAll(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'corral-dev-e2e-'))
    dataDir = join(tmp, 'data')
    env = { XDG_CONFIG_HOME: join(tmp, 'config') }
    dev = await startDev(dataDir, env)
  })
  afterAll(async () => {
    await dev?.stop()
    rmSync(tmp, { recursive: true, force: true })
  })

  it('one task submit shows the agent writing a file under the policy: decisions, debits, agent events', async () => {
    expect(dev.output()).toContain('corral task submit --role demo')
    // The summary names the console, and the console is there.
    expect(dev.output()).toContain(`console     ${dev.url}/ `)
    const page = await fetch(`${dev.url}/`)
    expect(page.status).toBe(200)
    expect(page.headers.get('content-type')).toMatch(/^text\/html/)
    const submitted = await runCorral(['task', 'submit', '--role', 'demo', 'say hello', '--wait'], { env })
    expect(submitted.code, `${submitted.stdout}\n${submitted.stderr}\n${dev.output().slice(-3000)}`).toBe(0)
    expect(submitted.stdout + submitted.stderr).toMatch(/completed/)

    const { events: [task] } = await api('/audit?filter=event_type%3Dtask_completed&limit=1')
    const wsId: string = task.workspace_id
    const audit = async (filter: string) => (await api(`/workspaces/${wsId}/audit?order=asc&limit=1000&filter=${encodeURIComponent(filter)}`)).events as any[]
    const decisions = await audit('event_type=policy_decision')
    expect(decisions).toHaveLength(3)
    for (const d of decisions) {
      expect(d).toMatchObject({ decision: 'allow', capability_name: 'model', destination: '127.0.0.1', path: '/v1/messages', agent_role: 'demo', agent_provider: 'demo-model', auth_used: ['demo-model'] })
    }
    expect(decisions.map((d) => d.debits.output_tokens)).toEqual([38, 24, 17])

    const agent = await audit('actor=agent')
    const calls = agent.filter((e) => e.event_type === 'tool_call').map((e) => e.detail?.tool ?? e.tool)
    expect(calls).toEqual(['write_file', 'run_command', 'finish'])
    expect(agent.some((e) => e.event_type === 'file_change' && JSON.stringify(e).includes('hello.md'))).toBe(true)
    // The snapshot is taken once the workspace is idle again after the task.
    let files: string[] = []
    for (let i = 0; i < 200 && !files.includes('hello.md'); i++) {
      files = ((await api(`/workspaces/${wsId}/snapshot/files`)).entries ?? []).map((e: any) => e.path)
      if (!files.includes('hello.md')) await new Promise((r) => setTimeout(r, 100))
    }
    expect(files).toContain('hello.md')
  })

  it('a second start on the same data dir says plainly that one is running', async () => {
    const second = await runCorral(['dev', '--data-dir', dataDir, '--port', '0'], { env })
    expect(second.code).toBe(1)
    expect(second.stderr).toMatch(/corral dev is already running on .* \(pid \d+, API http:\/\/127\.0\.0\.1:\d+\/v1\)/)
    expect(second.stderr.trim().split('\n')).toHaveLength(1)
  })

  it('a restart re-seeds in place: the same providers and roles (one per agent kind), the policies naming the new model port', async () => {
    expect(await dev.stop()).toBe(0)
    dev = await startDev(dataDir, env)
    const providers = (await api('/providers')).providers as any[]
    expect(providers.map((p) => [p.name, p.kind])).toEqual([['demo-gemini', 'gemini'], ['demo-model', 'anthropic'], ['demo-openai', 'openai']])
    const roles = (await api('/agent-roles')).agent_roles as any[]
    expect(roles.map((r) => [r.name, r.agent_kind])).toEqual([
      ['claude-code', 'claude-code'], ['codex', 'codex'], ['demo', undefined], ['gemini-cli', 'gemini-cli'], ['opencode', 'opencode'],
    ])
    const port = new URL(providers[1].base_url).port
    for (const r of roles) expect(r.capabilities).toContain(`"127.0.0.1:${port}"`)
  })

  it('a port somebody holds and an unreachable database each end in one plain line and exit 1', async () => {
    const holder = createServer()
    await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r))
    const port = (holder.address() as { port: number }).port
    try {
      const clash = await runCorral(['dev', '--data-dir', join(tmp, 'clash'), '--port', String(port), '--proxy-port', '0', '--model-port', '0'], { env })
      expect(clash.code).toBe(1)
      expect(clash.stderr.trim().split('\n')).toHaveLength(1)
      expect(clash.stderr).toContain(`port ${port} is already in use (--port): another corral serve or dev is probably running`)
    } finally {
      holder.close()
    }
    const db = await runCorral(['dev', '--data-dir', join(tmp, 'nodb'), '--port', '0', '--db', 'postgres://corral:hunter2@127.0.0.1:1/corral'], { env })
    expect(db.code).toBe(1)
    expect(db.stderr.trim().split('\n')).toHaveLength(1)
    expect(db.stderr).toContain('cannot reach the database postgres://corral@127.0.0.1:1/corral (ECONNREFUSED): check --db / CORRAL_DB_URL')
    expect(db.stderr).not.toContain('hunter2')
  })
})
