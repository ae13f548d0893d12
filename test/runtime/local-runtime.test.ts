import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { randomUUID } from 'node:crypto'
import https from 'node:https'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/ca.js'
import { packageRoot } from '../../src/runtime/layout.js'
import { DEFAULT_SANDBOX_UID, LocalRuntime } from '../../src/runtime/local-runtime.js'
import { bwrapAvailable, hostAddress } from './helpers.js'
import { PROBE_SCRIPT } from './probe-script.js'
import { startStandInProxy, startTarget } from './stand-ins.js'
import { localRuntime, type LocalRuntimeUnderTest } from './drivers.js'

const available = await bwrapAvailable()

describe.skipIf(!available)(LocalRuntime.name, () => {
  // The runtime root lies inside the (read-only bound) corral package on purpose: the sandbox must
  // still not see other workspaces there.
  let root: string
  let runtime: LocalRuntimeUnderTest
  let proxy: Awaited<ReturnType<typeof startStandInProxy>>
  let target: Awaited<ReturnType<typeof startTarget>>

  beforeAll(async () => {
    await mkdir(join(packageRoot(), '.corral'), { recursive: true })
    root = await mkdtemp(join(packageRoot(), '.corral', 'test-runtime-'))
    proxy = await startStandInProxy()
    target = await startTarget()
    runtime = localRuntime({ root, proxy: { host: '127.0.0.1', port: proxy.port }, stopGraceMs: 1000, warn: () => {} })
  })

  afterAll(async () => {
    await runtime?.close()
    await proxy?.close()
    await target?.close()
    await rm(root, { recursive: true, force: true })
  })

  it('passes its own start-up check', async () => {
    expect(await runtime.check()).toMatchObject({ ok: true, problems: [], warnings: [], fatal: [] })
  })

  it('confines the agent: no network but the proxy, read-only host, own pid namespace, non-root', async () => {
    const other = await runtime.provision({ workspaceId: `ws_other_${randomUUID().slice(0, 8)}` })
    await writeFile(join(other.dataDir, 'secret.txt'), 'not yours')
    const ws = await runtime.provision({ workspaceId: `ws_probe_${randomUUID().slice(0, 8)}` })
    const repoFile = join(packageRoot(), 'package.json')
    // A runtime on which check() was never called must sandbox just as tightly.
    const fresh = localRuntime({ root, proxy: { host: '127.0.0.1', port: proxy.port }, stopGraceMs: 1000, warn: () => {} })
    const agent = await fresh.startAgent(ws.workspaceId, {
      command: [process.execPath, '-e', PROBE_SCRIPT],
      proxyToken: 'cap_test_token',
      env: {
        PROBE_TARGET_PORT: String(target.port),
        PROBE_HOST_ADDRESS: hostAddress() ?? '',
        PROBE_REPO_FILE: repoFile,
        PROBE_OTHER_WORKSPACE_FILE: join(other.dataDir, 'secret.txt'),
      },
    })
    expect(await agent.exited).toEqual({ code: 0, signal: null })
    const probe = JSON.parse(await readFile(join(ws.dataDir, 'probe.json'), 'utf8'))

    // Never root: uid 1000 in its user namespace, or, when serve runs as root, an unprivileged host uid.
    const uid = process.getuid?.() === 0 ? DEFAULT_SANDBOX_UID : 1000
    expect(probe.uid).toBe(uid)
    expect(probe.gid).toBe(uid)
    // PID namespace: only bwrap's reaper, the init and the probe exist (pids count node's threads
    // too); as root, also transparent egress's relay of the tun device (egress.ts), not the agent's uid.
    expect(probe.pid).toBeLessThan(100)
    expect(probe.pids).toBe(process.getuid?.() === 0 ? 4 : 3)
    // Network namespace: loopback only, nothing outside reachable directly, no DNS. As root,
    // transparent egress adds the tun device that turns UDP into reports (nothing behind it).
    expect(probe.interfaces).toEqual(process.getuid?.() === 0 ? ['lo', 'corral0'] : ['lo'])
    expect(probe.directLoopback).toBe('ECONNREFUSED')
    // As root, transparent egress takes a direct connection into the sandbox's own listener, which
    // hands it to the proxy (this stand-in refuses it): it connects, and the host never sees it
    // (target.hits below); the lookup goes to corral's resolver, which this stand-in does not run.
    if (hostAddress()) expect(probe.directHost).toBe(process.getuid?.() === 0 ? 'connected' : 'ENETUNREACH')
    expect(['ENOTFOUND', 'EAI_AGAIN', 'ECONNREFUSED']).toContain(probe.dns)
    // Through the proxy variables the same server is reachable, and the proxy saw the token.
    expect(probe.viaProxy).toEqual({ status: 200, body: 'hello from outside' })
    expect(proxy.seen).toContainEqual({ method: 'GET', url: `http://127.0.0.1:${target.port}/through-proxy`, proxyAuthorization: 'Bearer cap_test_token' })
    expect(target.hits).toEqual(['GET /through-proxy'])
    // Filesystem: /data writable, host read-only, host secrets and other workspaces invisible.
    expect(probe.writeData).toBe('written')
    expect(await readFile(join(ws.dataDir, 'written-inside.txt'), 'utf8')).toBe('x')
    expect(probe.writeUsr).toBe('EROFS')
    expect(probe.writeEtc).toBe('EROFS')
    expect(probe.writeRepo).toBe('EROFS')
    expect(probe.readShadow).toBe('ENOENT')
    expect(probe.readRuntimeRoot).toBe('ENOENT')
    // No nested user namespace (bwrap --disable-userns): no way to regain capabilities inside.
    expect(probe.nestedUserns).not.toBe(0)
    // Environment: the token and proxy are set, the bridge plumbing is not leaked to the agent.
    expect(probe.env).toEqual({ token: 'cap_test_token', bridgeSocketHidden: true, proxy: 'http://corral:cap_test_token@127.0.0.1:3128', ca: undefined, cwd: '/data' })
    expect((await fresh.status(ws.workspaceId)).phase).toBe('ready')
  })

  it('makes the corral CA trusted by ordinary tools: curl reaches an HTTPS server through the proxy', async () => {
    const ca = await loadOrCreateCa(join(root, 'ca'))
    await writeFile(join(root, 'corral-ca.pem'), ca.certPem)
    const leaf = await new LeafMinter(ca).pemFor('127.0.0.1')
    const server = https.createServer(leaf, (_req, res) => res.end('tls ok'))
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const port = (server.address() as AddressInfo).port
    const trusting = localRuntime({ root, proxy: { host: '127.0.0.1', port: proxy.port }, caCertPath: join(root, 'corral-ca.pem'), warn: () => {} })
    try {
      const ws = await trusting.provision({ workspaceId: `ws_curl_${randomUUID().slice(0, 8)}` })
      const agent = await trusting.startAgent(ws.workspaceId, {
        command: ['/bin/sh', '-c', `curl -sS --max-time 20 https://127.0.0.1:${port}/ > /data/curl.out 2>&1; echo $? > /data/curl.rc`],
        proxyToken: 'tok_curl',
      })
      await agent.exited
      expect(await readFile(join(ws.dataDir, 'curl.out'), 'utf8')).toBe('tls ok')
      expect((await readFile(join(ws.dataDir, 'curl.rc'), 'utf8')).trim()).toBe('0')
      // curl knows only the proxy variables: the token reaches the proxy as Basic userinfo.
      expect(proxy.seen).toContainEqual({ method: 'CONNECT', url: `127.0.0.1:${port}`, proxyAuthorization: `Basic ${Buffer.from('corral:tok_curl').toString('base64')}` })
    } finally {
      server.closeAllConnections()
      server.close()
    }
  })

  it('stops a long-running agent, snapshots /data and reports the workspace stopped', async () => {
    const ws = await runtime.provision({ workspaceId: `ws_stop_${randomUUID().slice(0, 8)}` })
    const agent = await runtime.startAgent(ws.workspaceId, {
      command: ['/bin/sh', '-c', 'echo started > /data/started.txt; exec sleep 600'],
      proxyToken: 't',
    })
    expect((await runtime.status(ws.workspaceId)).phase).toBe('running')
    while (!(await readFile(join(ws.dataDir, 'started.txt'), 'utf8').catch(() => ''))) await new Promise((r) => setTimeout(r, 20))
    await expect(runtime.startAgent(ws.workspaceId, { command: ['/bin/true'], proxyToken: 't' })).rejects.toMatchObject({ code: 'agent_running' })
    const snap = await runtime.stop(ws.workspaceId, 0)
    expect((await agent.exited).code).not.toBe(0)
    expect(snap).toMatchObject({ workspaceId: ws.workspaceId, taskCount: 0, reason: 'stop' })
    expect((await runtime.status(ws.workspaceId)).phase).toBe('stopped')
    const files = await runtime.listSnapshotFiles(ws.workspaceId)
    expect(files.map((f) => f.path)).toEqual(['started.txt'])
  })

  it('says plainly what is missing when bubblewrap is not installed', async () => {
    const broken = localRuntime({ root, proxy: { host: '127.0.0.1', port: 1 }, bwrap: 'bwrap-not-installed-here', warn: () => {} })
    const check = await broken.check()
    expect(check.ok).toBe(false)
    expect(check.problems[0]).toMatch(/bubblewrap is not installed .*apt-get install bubblewrap.*--runtime process/)
    // Starting anyway fails with the reason, and leaves no agent or bridge behind.
    const ws = await broken.provision({ workspaceId: `ws_nobwrap_${randomUUID().slice(0, 8)}` })
    await expect(broken.startAgent(ws.workspaceId, { command: ['/bin/true'], proxyToken: 't' }))
      .rejects.toMatchObject({ code: 'runtime_unavailable', message: expect.stringMatching(/bwrap-not-installed-here(: spawn bwrap-not-installed-here ENOENT|: not found)/) })
    expect((await broken.status(ws.workspaceId)).phase).toBe('ready')
  })

  it('reports an agent that cannot start, with its log', async () => {
    const ws = await runtime.provision({ workspaceId: `ws_bad_${randomUUID().slice(0, 8)}` })
    await expect(runtime.startAgent(ws.workspaceId, { command: ['/nonexistent/agent'], proxyToken: 't' }))
      .rejects.toMatchObject({ code: 'runtime_unavailable', message: expect.stringMatching(/did not start: cannot start agent \/nonexistent\/agent: spawn \/nonexistent\/agent ENOENT/) })
  })
})
