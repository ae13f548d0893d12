// Workspace runtime benchmark (not a test). What can be measured without the control plane:
//  - sandbox cold start: provision + start until the agent inside has made its first request
//    through the proxy bridge (a minimal agent, so this is the runtime's own cost), target p50 ≤ 500 ms
//  - reference agent cold start: provision + start until its session_start event arrives through
//    the proxy (dist/agent/main.js when built, else the tsx sources — slower, noted in the output),
//    and the same through `corral agent` (oclif) for comparison
//  - stop with snapshot, and fork, of a workspace holding 100 MB in 1,000 files (fork target ≤ 2 s)
//  - snapshot listing of that workspace (target ≤ 100 ms)
//  - control plane: `POST /v1/tasks` → the agent's `task_start` row (its audit timestamp), cold (a
//    new workspace each time) and claiming a warm pool member whose agent is already waiting,
//    against a real `corral serve` (dist/, so `npm run build` first) with the fake Anthropic API
//    from test/agent (targets: cold p50 ≤ 500 ms, warm claim p50 ≤ 50 ms). BENCH_CONTROL_PLANE=0 skips.
// Run: `npm run bench:workspaces` → prints a table, writes bench/results/workspaces.json.
// BENCH_ONLY=control-plane runs only the serve part (BENCH_RUNS sets its runs, at most 8 by default).

import { randomBytes, randomUUID } from 'node:crypto'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { defaultAgentCommand, packageRoot } from '../src/runtime/layout.js'

import { startStack } from '../test/helpers/serve.js'
import { startStandInProxy } from '../test/runtime/stand-ins.js'
import { localRuntime, processRuntime, type DirectoryRuntimeUnderTest } from '../test/runtime/drivers.js'

const RUNS = Number(process.env.BENCH_RUNS ?? 10)
const HEAVY_RUNS = Number(process.env.BENCH_HEAVY_RUNS ?? 3)
const FILES = 1000
const FILE_BYTES = 100 * 1024 // 1,000 × 100 KiB ≈ 100 MB

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]
}
const ms = (start: bigint): number => Number(process.hrtime.bigint() - start) / 1e6
const row = (name: string, times: number[], target?: number) => ({
  name, runs: times.length, p50_ms: +pct(times, 50).toFixed(1), p95_ms: +pct(times, 95).toFixed(1), min_ms: +Math.min(...times).toFixed(1),
  target_ms: target, ok: target === undefined ? undefined : pct(times, 50) <= target,
})

/** A loopback server that resolves a waiter per workspace when that workspace's first request arrives. */
async function startReadyServer() {
  const waiters = new Map<string, () => void>()
  const server = http.createServer((req, res) => {
    const id = (req.url ?? '').split('/').filter(Boolean).at(-2) ?? ''
    res.writeHead(202).end()
    const w = waiters.get(decodeURIComponent(id))
    if (w) {
      waiters.delete(id)
      w()
    }
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    wait: (id: string) => new Promise<void>((r) => waiters.set(id, r)),
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()) }),
  }
}

// The minimal agent: one request through HTTP_PROXY to <ready>/ready/<workspace>/x, then idle.
const MINIMAL_AGENT = String.raw`
const http = require('node:http'); const p = new URL(process.env.HTTP_PROXY)
http.request({ host: p.hostname, port: p.port, path: process.env.READY_URL + '/ready/' + process.env.CORRAL_WORKSPACE_ID + '/x',
  headers: { 'proxy-authorization': 'Bearer ' + process.env.CORRAL_PROXY_TOKEN } }, (r) => r.resume()).end()
setInterval(() => {}, 1 << 30)`

async function coldStarts(runtime: DirectoryRuntimeUnderTest, ready: Awaited<ReturnType<typeof startReadyServer>>, command: (id: string) => { command: string[]; env: Record<string, string>; files?: Record<string, string> }, runs: number) {
  const times: number[] = []
  for (let i = 0; i < runs + 1; i++) {
    const id = `ws_bench_${randomUUID().slice(0, 8)}`
    const waited = ready.wait(id)
    const start = process.hrtime.bigint()
    await runtime.provision({ workspaceId: id })
    const c = command(id)
    await runtime.startAgent(id, { command: c.command, proxyToken: 'bench', env: c.env, ...(c.files ? { files: c.files } : {}) })
    await waited
    const t = ms(start)
    if (i > 0) times.push(t) // the first run warms the page cache
    await runtime.remove(id)
  }
  return times
}

async function heavy(runtime: DirectoryRuntimeUnderTest) {
  const stops: number[] = []
  const forks: number[] = []
  const listings: number[] = []
  let entries = 0
  for (let run = 0; run < HEAVY_RUNS; run++) {
    const id = `ws_heavy_${randomUUID().slice(0, 8)}`
    const ws = await runtime.provision({ workspaceId: id })
    const blob = randomBytes(FILE_BYTES)
    for (let d = 0; d < 10; d++) {
      await mkdir(join(ws.dataDir, `dir${d}`))
      for (let f = 0; f < FILES / 10; f++) await writeFile(join(ws.dataDir, `dir${d}`, `file${f}.bin`), blob)
    }
    await runtime.startAgent(id, { command: ['/bin/sh', '-c', 'exec sleep 600'], proxyToken: 'bench' })
    let start = process.hrtime.bigint()
    await runtime.stop(id, 1)
    stops.push(ms(start))
    // The first listings run cold (JIT, page cache); a serving process lists warm.
    for (let i = 0; i < 13; i++) {
      start = process.hrtime.bigint()
      entries = (await runtime.listSnapshotFiles(id)).length
      if (i >= 3) listings.push(ms(start))
    }
    const child = `ws_fork_${randomUUID().slice(0, 8)}`
    start = process.hrtime.bigint()
    await runtime.provision({ workspaceId: child, forkFrom: { workspaceId: id, taskCount: 1 } })
    forks.push(ms(start))
    await runtime.remove(child)
    await runtime.remove(id)
  }
  return { stops, forks, listings, entries }
}

/**
 * POST /v1/tasks → task_start, measured from just before the POST to the task_start row's own
 * timestamp (stamped by serve when the event arrives; same clock), so polling adds nothing.
 */
async function controlPlane(kind: 'local' | 'process', runs: number) {
  // The bench polls the audit log every 10 ms: the per-key rate limit (20/s after a burst) would
  // answer 429 before the runs end, and it is not what is measured here.
  const stack = await startStack({
    runtime: kind,
    env: { CORRAL_RATE_LIMIT_BURST: '100000', CORRAL_RATE_LIMIT_PER_SECOND: '10000' },
    model: () => ({ tools: [{ name: 'finish', input: { summary: 'ok' } }], usage: { input: 1, output: 1 } }),
    provider: { name: 'fake', default_model: 'bench' },
    role: { name: 'cold' },
  })
  const serve = stack.serve
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${serve.url}/v1${path}`, {
      method, headers: { authorization: `Bearer ${serve.adminKey}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    })
    const text = await res.text()
    if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${text.slice(0, 300)}`)
    return JSON.parse(text) as any
  }
  const until = async <T>(probe: () => Promise<T | undefined | false>, what: string): Promise<T> => {
    const end = Date.now() + 60_000
    for (;;) {
      const v = await probe()
      if (v) return v
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
      await new Promise((r) => setTimeout(r, 10))
    }
  }
  const taskStart = async (roleName: string): Promise<number> => {
    const t0 = Date.now()
    const created = await api('POST', '/tasks', { role_name: roleName, description: 'bench' })
    const row = await until(async () => (await api('GET', `/workspaces/${created.workspace_id}/audit?filter=${encodeURIComponent('event_type=task_start')}`)).events?.[0], 'task_start')
    await until(async () => { const w = await api('GET', `/workspaces/${created.workspace_id}`); return w.state === 'idle' && w.task_count >= 1 }, 'the task done')
    await api('POST', `/workspaces/${created.workspace_id}/stop`)
    return Date.parse(row.timestamp) - t0
  }
  try {
    const cold: number[] = []
    for (let i = 0; i < runs + 1; i++) {
      const t = await taskStart('cold')
      if (i > 0) cold.push(t)
    }
    const warmRole = await api('POST', '/agent-roles', { name: 'warm', provider_id: stack.provider!.id, pool_policy: 'static', pool_size: 1 })
    const warm: number[] = []
    for (let i = 0; i < runs + 1; i++) {
      await until(async () => (await api('GET', '/workspaces?state=idle')).workspaces.some((w: any) => w.pooled && w.role_id === warmRole.id), 'an idle pool member')
      // The member's agent starts right after it is idle and needs about a second to be waiting
      // in GET /tasks/next (see "agent cold start" above); there is no API signal for it.
      await new Promise((r) => setTimeout(r, 2500))
      const t = await taskStart('warm')
      if (i > 0) warm.push(t)
    }
    return { cold, warm }
  } catch (err) {
    process.stderr.write(`corral serve's output (last 4,000 characters):\n${serve.output().slice(-4000)}\n`)
    throw err
  } finally {
    await stack.close()
  }
}

function writeResults(results: ReturnType<typeof row>[]): void {
  mkdirSync(new URL('results/', import.meta.url), { recursive: true })
  const out = new URL(onlyControlPlane ? 'results/workspaces-control-plane.json' : 'results/workspaces.json', import.meta.url)
  writeFileSync(out, JSON.stringify({ at: new Date().toISOString(), node: process.version, runtime: kind, cpus: cpus().length, loadavg: loadavg(), results }, null, 2) + '\n')
  console.log(`wrote ${fileURLToPath(out)}`)
}

const kind = process.env.BENCH_RUNTIME === 'process' ? 'process' : 'local'
const scratch = await mkdtemp(join(tmpdir(), 'corral-bench-ws-'))
const proxy = await startStandInProxy()
const ready = await startReadyServer()
const options = { root: scratch, proxy: { host: '127.0.0.1', port: proxy.port }, stopGraceMs: 1000, warn: () => {} }
const runtime: DirectoryRuntimeUnderTest = kind === 'local' ? localRuntime(options) : processRuntime(options)
const check = await runtime.check()
if (!check.ok) {
  console.error(`cannot run the ${kind} runtime here: ${check.problems.join('; ')}`)
  process.exit(1)
}

const onlyControlPlane = process.env.BENCH_ONLY === 'control-plane'
const controlPlaneRows = (cp: { cold: number[]; warm: number[] }) => [
  row(`POST /v1/tasks → task_start, cold (serve, ${kind})`, cp.cold, 500),
  row(`POST /v1/tasks → task_start, warm pool claim (serve, ${kind})`, cp.warm, 50),
]

async function runtimeParts() {
  const minimal = await coldStarts(runtime, ready, () => ({ command: [process.execPath, '-e', MINIMAL_AGENT], env: { READY_URL: ready.url } }), RUNS)
  // corral agent: its first event (session_start) posted to <ready>/task/<task id>/event; the
  // model is never called because the bench stops the workspace right after.
  const built = existsSync(join(packageRoot(), 'dist', 'agent', 'main.js'))
  const agentCommand = built ? [process.execPath, join(packageRoot(), 'dist', 'agent', 'main.js')] : defaultAgentCommand()
  const cliAgent = [process.execPath, join(packageRoot(), 'bin', 'run.js'), 'agent']
  const corralAgent = await coldStarts(runtime, ready, (id) => ({
    command: agentCommand,
    env: { CORRAL_MODEL: 'bench', CORRAL_PROVIDER_BASE_URL: 'http://127.0.0.1:1', CORRAL_EVENTS_URL: ready.url },
    files: { 'tasks.json': JSON.stringify({ id, description: 'bench' }) },
  }), Math.min(RUNS, 5))
  // The same agent behind oclif (`corral agent`), for comparison.
  const viaCli = built ? await coldStarts(runtime, ready, (id) => ({
    command: cliAgent,
    env: { CORRAL_MODEL: 'bench', CORRAL_PROVIDER_BASE_URL: 'http://127.0.0.1:1', CORRAL_EVENTS_URL: ready.url },
    files: { 'tasks.json': JSON.stringify({ id, description: 'bench' }) },
  }), Math.min(RUNS, 5)) : []
  const h = await heavy(runtime)
  const cp = process.env.BENCH_CONTROL_PLANE !== '0' && built ? await controlPlane(kind, Math.min(RUNS, 8)) : undefined
  return [
    ...(cp ? controlPlaneRows(cp) : []),
    row(`sandbox cold start → first request through the proxy (${kind})`, minimal, 500),
    row(`agent cold start → session_start through the proxy (${built ? 'dist/agent/main.js' : 'tsx sources'})`, corralAgent),
    ...(viaCli.length > 0 ? [row('same via `corral agent` (oclif)', viaCli)] : []),
    row('stop with snapshot, 100 MB in 1,000 files', h.stops),
    row('fork (restore) of 100 MB in 1,000 files', h.forks, 2000),
    row(`snapshot listing (${h.entries} entries)`, h.listings, 100),
  ]
}

try {
  const results = onlyControlPlane ? controlPlaneRows(await controlPlane(kind, RUNS)) : await runtimeParts()
  console.table(results)
  writeResults(results)
} finally {
  await runtime.close()
  await proxy.close()
  await ready.close()
  await rm(scratch, { recursive: true, force: true })
}
