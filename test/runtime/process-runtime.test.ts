import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { NO_ISOLATION_WARNING, ProcessRuntime } from '../../src/runtime/process-runtime.js'
import { processRuntime, type ProcessRuntimeUnderTest } from './drivers.js'

describe(ProcessRuntime.name, () => {
  let root: string
  const warnings: string[] = []
  let runtime: ProcessRuntimeUnderTest

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'corral-proc-'))
    runtime = processRuntime({ root, proxy: { host: '127.0.0.1', port: 4567 }, stopGraceMs: 500, warn: (l) => warnings.push(l) })
  })
  afterAll(async () => {
    await runtime.close()
    await rm(root, { recursive: true, force: true })
  })

  it('says loudly that it does not isolate, at construction and in its check', async () => {
    expect(warnings).toEqual([NO_ISOLATION_WARNING])
    expect(NO_ISOLATION_WARNING).toMatch(/WITHOUT|bypasses policy/)
    expect(await runtime.check()).toEqual({ ok: true, problems: [], warnings: [NO_ISOLATION_WARNING] })
    expect(runtime.isolated).toBe(false)
  })

  it('runs the agent on the host with the proxy variables aimed at the proxy and /data at the workspace dir', async () => {
    const ws = await runtime.provision({ workspaceId: 'ws_proc_env' })
    const agent = await runtime.startAgent(ws.workspaceId, {
      command: [process.execPath, '-e', "require('fs').writeFileSync(process.env.CORRAL_WORKSPACE_DIR + '/env.json', JSON.stringify({ p: process.env.HTTPS_PROXY, t: process.env.CORRAL_PROXY_TOKEN, x: process.env.EXTRA, cwd: process.cwd() }))"],
      proxyToken: 'tok',
      env: { EXTRA: 'yes' },
    })
    expect(await agent.exited).toEqual({ code: 0, signal: null })
    expect(JSON.parse(await readFile(join(ws.dataDir, 'env.json'), 'utf8'))).toMatchObject({ p: 'http://corral:tok@127.0.0.1:4567', t: 'tok', x: 'yes' })
  })

  it('refuses a second agent in the same workspace, even when both starts race', async () => {
    const ws = await runtime.provision({ workspaceId: 'ws_proc_race' })
    const launch = { command: ['/bin/sh', '-c', 'exec sleep 600'], proxyToken: 'tok' }
    const results = await Promise.allSettled([runtime.startAgent(ws.workspaceId, launch), runtime.startAgent(ws.workspaceId, launch)])
    expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected'])
    expect(results.find((r) => r.status === 'rejected')).toMatchObject({ reason: { code: 'agent_running' } })
    await runtime.stopAgent(ws.workspaceId)
    expect((await runtime.status(ws.workspaceId)).phase).toBe('ready')
    await expect(runtime.startAgent('ws_never_provisioned', launch)).rejects.toMatchObject({ code: 'workspace_not_found' })
  })

  it('stops an agent that ignores SIGTERM with SIGKILL after the grace period, and logs its output', async () => {
    const ws = await runtime.provision({ workspaceId: 'ws_proc_stubborn' })
    const agent = await runtime.startAgent(ws.workspaceId, {
      command: [process.execPath, '-e', "process.on('SIGTERM', () => console.log('ignoring SIGTERM')); console.log('up'); setInterval(() => {}, 1000)"],
      proxyToken: 'tok',
    })
    // Stop only once the handler is installed (the agent says 'up' after installing it).
    while (!(await readFile(agent.logPath, 'utf8')).includes('up')) await new Promise((r) => setTimeout(r, 20))
    await runtime.stop(ws.workspaceId, 0)
    const exit = await agent.exited
    expect(exit.code).toBe(128 + 9)
    expect(await readFile(agent.logPath, 'utf8')).toContain('ignoring SIGTERM')
  })
})
