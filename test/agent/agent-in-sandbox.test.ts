import { randomUUID } from 'node:crypto'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/ca.js'
import { defaultAgentCommand, packageRoot } from '../../src/runtime/layout.js'
import { DEFAULT_SANDBOX_UID } from '../../src/runtime/local-runtime.js'
import { SANDBOX_UID } from '../../src/runtime/sandbox-args.js'
import { bwrapAvailable } from '../runtime/helpers.js'
import { startStandInProxy } from '../runtime/stand-ins.js'
import { type FakeProvider, startFakeAnthropic } from './fake-model.js'
import { localRuntime, type LocalRuntimeUnderTest } from '../runtime/drivers.js'

const available = await bwrapAvailable()

/** Stands in for the control plane's agent callback: records `POST /task/<id>/event` bodies. */
async function startCallback(): Promise<{ url: string; events: Array<{ path: string; body: any }>; close: () => Promise<void> }> {
  const events: Array<{ path: string; body: any }> = []
  const server = http.createServer((req, res) => {
    let raw = ''
    req.setEncoding('utf8')
    req.on('data', (d) => (raw += d))
    req.on('end', () => {
      events.push({ path: req.url ?? '', body: JSON.parse(raw) })
      res.writeHead(202, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    events,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()) }),
  }
}

// The whole chain on real processes: `corral agent` in a bubblewrap sandbox, its only way out the
// bridge to a stand-in proxy, a fake Anthropic API over HTTPS whose certificate comes from the
// corral CA mounted into the sandbox, and events posted back through the same proxy.
describe.skipIf(!available)('corral agent inside the local runtime', () => {
  let root: string
  let proxy: Awaited<ReturnType<typeof startStandInProxy>>
  let callback: Awaited<ReturnType<typeof startCallback>>
  let provider: FakeProvider
  let runtime: LocalRuntimeUnderTest

  beforeAll(async () => {
    await mkdir(join(packageRoot(), '.corral'), { recursive: true })
    root = await mkdtemp(join(packageRoot(), '.corral', 'test-agent-'))
    const ca = await loadOrCreateCa(join(root, 'ca'))
    await writeFile(join(root, 'ca.pem'), ca.certPem)
    provider = await startFakeAnthropic((_body, index) => index === 0
      ? { text: 'Writing it.', tools: [
          { name: 'write_file', input: { path: 'report.md', content: '# Report\nall good\n' } },
          { name: 'run_command', input: { command: 'wc -l report.md > lines.txt && id -u' } },
        ] }
      : { tools: [{ name: 'finish', input: { summary: 'Report written.' } }] }, await new LeafMinter(ca).pemFor('127.0.0.1'))
    proxy = await startStandInProxy()
    callback = await startCallback()
    runtime = localRuntime({ root: join(root, 'runtime'), proxy: { host: '127.0.0.1', port: proxy.port }, caCertPath: join(root, 'ca.pem'), stopGraceMs: 1000, warn: () => {} })
  })
  afterAll(async () => {
    await runtime?.close()
    await provider?.close()
    await proxy?.close()
    await callback?.close()
    await rm(root, { recursive: true, force: true })
  })

  it('runs a task end to end: model over TLS through the proxy, tools in /data, events back, snapshot after', async () => {
    const ws = await runtime.provision({ workspaceId: `ws_agent_${randomUUID().slice(0, 8)}` })
    const agent = await runtime.startAgent(ws.workspaceId, {
      command: defaultAgentCommand(),
      proxyToken: 'cap_sandbox_token',
      env: {
        CORRAL_PROVIDER_KIND: 'anthropic',
        CORRAL_PROVIDER_BASE_URL: provider.url,
        CORRAL_MODEL: 'claude-test',
        CORRAL_EVENTS_URL: callback.url,
        CORRAL_ENVIRONMENT_DESCRIPTION: 'sandbox test',
      },
      files: { 'tasks.json': JSON.stringify([{ id: 'task_sbx', description: 'Write a report', uploads: ['/data/uploads/task_sbx/input.csv'] }]) },
    })
    const exit = await agent.exited
    if (exit.code !== 0) throw new Error(`agent exited ${exit.code}: ${await readFile(agent.logPath, 'utf8')}`)

    expect(await readFile(join(ws.dataDir, 'report.md'), 'utf8')).toBe('# Report\nall good\n')
    expect((await readFile(join(ws.dataDir, 'lines.txt'), 'utf8')).trim()).toBe('2 report.md')
    // Model calls and events both went through the proxy, carrying the capability token.
    const providerPort = new URL(provider.url).port
    expect(proxy.seen.filter((s) => s.url.endsWith(`:${providerPort}`)).every((s) => s.proxyAuthorization === 'Bearer cap_sandbox_token')).toBe(true)
    expect(proxy.seen.some((s) => s.url.endsWith(`:${providerPort}`))).toBe(true)
    expect(provider.requests[0].body.system).toContain('Your working directory is /data.')
    expect(provider.requests[0].body.system).toContain('sandbox test')
    // Events arrived at /task/<id>/event in order, ending with a completed task.
    expect(callback.events.every((e) => e.path === '/task/task_sbx/event')).toBe(true)
    const types = callback.events.map((e) => e.body.type)
    expect(types.slice(0, 2)).toEqual(['session_start', 'task_start'])
    // write_file's file, then the file the shell command made (found by the /data scan inside the sandbox).
    expect(callback.events.filter((e) => e.body.type === 'file_change').map((e) => [e.body.path, e.body.action]))
      .toEqual([['report.md', 'created'], ['lines.txt', 'created']])
    expect(types.slice(-2)).toEqual(['task_end', 'session_end'])
    expect(callback.events.find((e) => e.body.type === 'task_end')!.body).toMatchObject({ status: 'completed', summary: 'Report written.' })
    const shell = callback.events.find((e) => e.body.type === 'tool_result' && e.body.tool === 'run_command')!.body
    // The agent's uid: an unprivileged host uid when serve is root (docs/runtime.md), else the
    // sandbox user namespace's fixed uid.
    expect(shell.output).toBe(`exit code 0\n${process.getuid?.() === 0 ? DEFAULT_SANDBOX_UID : SANDBOX_UID}\n`)

    // The runtime takes the after-task snapshot; the task file never entered /data.
    await runtime.snapshot(ws.workspaceId, 1, 'task')
    const paths = (await runtime.listSnapshotFiles(ws.workspaceId)).map((f) => f.path)
    expect(paths).toEqual(expect.arrayContaining(['report.md', 'lines.txt', '.corral/session.json']))
    expect(paths).not.toContain('tasks.json')
  }, 90_000)
})
