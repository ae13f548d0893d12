// Outbound proxy benchmark (not a test). One process tree on loopback: a keep-alive HTTPS upstream
// (bench/proxy-upstream.ts, with an h2-only second port), `corral proxy` (built binary when dist/
// exists, else sources), its peers (bench/proxy-peers.ts) — by default squid ssl-bump (the native
// TLS-intercepting peer: per-host certificates, a method + path ACL) and `node-floor`
// (bench/node-floor-proxy.ts: the least a TLS-intercepting proxy in Node does, no policy nor audit:
// corral's cost over it is its own) — and this process as the load generator. The same realistic
// policy and mix everywhere (bench/proxy-load.ts). Every run starts every proxy afresh and measures,
// target after target (direct first):
//  - closed loops at concurrency 32: POST req/s with the target's whole-process-tree CPU per
//    request, SSE streams/s, the first SSE event, MCP tools/call (typed CEL over the arguments);
//  - h2: one HTTP/2 connection with 64 streams in flight (bench/proxy-h2.ts);
//  - WebSocket: messages/s and the round trip per message (bench/proxy-websocket.ts);
//  - open loops at 500 req/s and at a third of corral's own closed-loop maximum of that run
//    (bench/proxy-rate.ts): latency from each request's scheduled start, added over direct's;
//  - RSS of each target's process tree after the run;
//  - the transparent mode (bench/proxy-transparent.ts): the same POSTs from a workspace-like
//    network namespace without HTTPS_PROXY, next to CONNECT from the same namespace, the lookups
//    through corral's resolver, and bench/resolver.ts's queries/s;
//  - corral's RSS with 1,000 SSE streams held open.
// Three runs by default, each reported, with each figure's spread and corral's ratios to squid
// ssl-bump and to the Node floor → bench/results/proxy.json (and the README's table on stdout).
//
//   npm run bench:proxy
//   CORRAL_BENCH_RUNS=3 CORRAL_BENCH_SECONDS=5 CORRAL_BENCH_LATENCY_SECONDS=5 CORRAL_BENCH_WARM_SECONDS=10   # the defaults
//   CORRAL_BENCH_RT=1 npm run bench:proxy       # then the same again under `chrt -r 10` (as root): an `rt` section
//   CORRAL_BENCH_PEERS=squid-bump,node-floor,squid,mitmproxy   # which peers (comma list; '' for none)
//   CORRAL_BENCH_TRANSPARENT=0                  # without the transparent mode (it needs root, bwrap, nft, ip, perl)
//   CORRAL_BENCH_WORKERS=N                      # this build as `corral proxy --workers N` (default 1)
//   CORRAL_BENCH_ALSO_WORKERS=N                 # also this build with `--workers N`, as `corral-wN`, same runs
//   CORRAL_BENCH_BASELINE=/path/to/other/checkout  # also that build (its dist/) as `corral-base`
//   CORRAL_BENCH_BASELINE_WORKERS=N             # the baseline build with `--workers N`, as `corral-base-wN`
//   CORRAL_BENCH_BASELINE_FIRST=1               # the baseline measured before this build (alternate between runs)
//   CORRAL_BENCH_BASELINE_NODE_ARGS="--max-semi-space-size=4"   # Node flags for the baseline only
//   CORRAL_BENCH_LOG_OFF=1                      # also this build without the provable log as `corral-log-off`,
//     and an appender draining `corral`'s store beside it (bench/proxy-log-switch.ts); with
//     CORRAL_BENCH_BASELINE, `corral-base` gets an appender draining its store too (an A/B with the log on)
//   CORRAL_BENCH_APPENDER_IDLE=1                # those appenders under SCHED_IDLE (`chrt -i 0`): they take
//     only CPU nothing else wants, so a tail left with them is their lock or I/O, not their CPU
//   CORRAL_BENCH_OUT=bench/results/x.json       # where the JSON goes
//   CORRAL_BENCH_PROFILE=1                      # --cpu-prof of the corral proxy → bench/results/prof/
//   CORRAL_BENCH_NODE_ARGS="--max-semi-space-size=64"   # Node flags for every corral build measured
//   CORRAL_BENCH_TAIL_DIR=/tmp/tail            # every proxy and the client record GC pauses and loop stalls (bench/tail-probe.mjs)
//     and each open-loop request's start and latency there; `npm run bench:tail -- /tmp/tail` lays the slowest over them
//   CORRAL_BENCH_MODE=rate npm run bench:proxy  # only the open loop at CORRAL_BENCH_RATE (bench/proxy-rate-run.ts;
//     CORRAL_BENCH_PERF=1 adds a `perf record` of each target; CORRAL_BENCH_RATE=500,1000 several rates;
//     CORRAL_BENCH_RATE_ROUNDS=N rounds alternating the proxies' order; CORRAL_BENCH_RATE_WARM_SECONDS the first warm-up)
//     CORRAL_BENCH_RATE_BACKLOG_SECONDS=S a POST closed loop of S s right before each proxy's window (the log's queue
//     fills), CORRAL_BENCH_RATE_BACKLOG_HOLD=1 with its appender process stopped meanwhile (the log trails by those
//     S s when the window starts, as pacing leaves it after a writer's burst), CORRAL_BENCH_APPENDER_TRACE=dir each
//     appender's queue and CPU every 250 ms (bench/appender-trace.ts lays them over the windows)
//   CORRAL_BENCH_MODE=alloc npm run bench:proxy   # only bytes allocated per POST by frame and scavenges per request,
//     at CORRAL_BENCH_RATE (default 300/s), rounds alternating the proxies' order (bench/proxy-alloc-run.ts)
//   CORRAL_BENCH_MODE=closed npm run bench:proxy  # only the POST closed loop, CPU per request by thread, rounds alternating
//     the proxies' order (bench/proxy-closed-run.ts; CORRAL_BENCH_CLOSED_ROUNDS, CORRAL_BENCH_PERF=1 as above)
//     CORRAL_BENCH_SYSCALLS=1   syscalls, page faults and context switches per request, and reads/writes per leg (bench/proxy-syscalls.ts)
//     CORRAL_BENCH_CHURN_DIR=D  async resources, socket timers and listeners per request of every Node proxy (bench/churn-probe.mjs)
import { spawn } from 'node:child_process'
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { Agent, ProxyAgent, type Dispatcher } from 'undici'
import { measureH2, type Via } from './proxy-h2.js'
import { CONCURRENCY, closedLoop, firstEvent, mcpCall, post, round, rssAtStreams, stream, treeCpuMs, treeRssMb } from './proxy-load.js'
import { startMitmproxy, startSquidBump, startSquidTunnel } from './proxy-peers.js'
import { fixedRate } from './proxy-rate.js'
import { rateRun } from './proxy-rate-run.js'
import { closedRun } from './proxy-closed-run.js'
import { allocRun } from './proxy-alloc-run.js'
import { markdownTable, printRun, summarize, type Metrics, type RunRecord } from './proxy-report.js'
import { ROOT, baselineStore, children, ensurePackages, seed, spawnUntil, startCorral, stopSince, type Seeded } from './proxy-setup.js'
import { logOffStore, startAppender } from './proxy-log-switch.js'
import { measureTransparent, resolverFigures } from './proxy-transparent.js'
import { measureWebSocket } from './proxy-websocket.js'

const env = process.env
const RUNS = Number(env.CORRAL_BENCH_RUNS ?? 3)
const SECONDS = Number(env.CORRAL_BENCH_SECONDS ?? 5)
const LATENCY_SECONDS = Number(env.CORRAL_BENCH_LATENCY_SECONDS ?? 5)
const WARM_SECONDS = Number(env.CORRAL_BENCH_WARM_SECONDS ?? 10)
const RATE = 500
const H2_STREAMS = 64
const STREAMS = 1000
const ONLY = env.CORRAL_BENCH_PEERS === undefined ? ['squid-bump', 'node-floor'] : env.CORRAL_BENCH_PEERS.split(',').map((s) => s.trim())
const TRANSPARENT = env.CORRAL_BENCH_TRANSPARENT !== '0'
const loadavg = (): number[] => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number)

export interface Target {
  name: string
  pid?: number
  /** `connections`: the pool size per origin (undici's default: unlimited) */
  dispatcher: (connections?: number) => Dispatcher
  /** How the h2 and WebSocket phases reach it; null: it does not offer that. */
  h2: Via | null
  ws: Via | null
  /** The process appending this target's store to the provable log (CORRAL_BENCH_LOG_OFF=1). */
  appenderPid?: number
}

interface Ctx { tmp: string; seeded: Seeded; upPort: number; h2Port: number; upCa: string; origin: string; nodeArgs: string[]; corralCa?: string }

async function startTargets(run: number, o: Ctx): Promise<Target[]> {
  const dir = join(o.tmp, `run-${run}`)
  mkdirSync(dir, { recursive: true })
  chmodSync(dir, 0o777)
  const { dataDir, dbUrl, token } = o.seeded
  // 1,000 streams of one workspace are held open at the end: room for them over the per-workspace limits.
  const proxyEnv = { CORRAL_LOG_LEVEL: 'warn', CORRAL_PROXY_MAX_CONNECTIONS_PER_WORKSPACE: String(STREAMS + 100), CORRAL_PROXY_MAX_INFLIGHT_PER_WORKSPACE: String(STREAMS + 100) }
  const direct: Via = { upstreamCaPem: o.upCa }
  const corralTarget = (name: string, p: { pid: number; url: string }, caPem: string): Target => {
    const via: Via = { upstreamCaPem: o.upCa, proxy: { url: p.url, token, caPem } }
    return { name, pid: p.pid, h2: via, ws: via, dispatcher: (n) => new ProxyAgent({ uri: p.url, token: `Bearer ${token}`, requestTls: { ca: caPem }, ...(n ? { connections: n } : {}) }) }
  }
  const workers = env.CORRAL_BENCH_WORKERS ? Number(env.CORRAL_BENCH_WORKERS) : 1
  const corral = await startCorral({ root: ROOT, tmp: o.tmp, dataDir, dbUrl, workers, nodeArgs: o.nodeArgs, env: proxyEnv })
  o.corralCa ??= readFileSync(join(dataDir, 'ca.pem'), 'utf8')
  const targets: Target[] = [
    { name: 'direct', h2: direct, ws: direct, dispatcher: (n) => new Agent({ connect: { ca: o.upCa }, ...(n ? { connections: n } : {}) }) },
    corralTarget('corral', corral, o.corralCa),
  ]
  if (env.CORRAL_BENCH_ALSO_WORKERS) {
    const n = Number(env.CORRAL_BENCH_ALSO_WORKERS)
    targets.push(corralTarget(`corral-w${n}`, await startCorral({ root: ROOT, tmp: o.tmp, dataDir, dbUrl, workers: n, nodeArgs: o.nodeArgs, env: proxyEnv }), o.corralCa))
  }
  // CORRAL_BENCH_APPENDER_TRACE=dir: each appender's queue and CPU every 250 ms there (bench/appender-trace.ts).
  const trace = (name: string) => (env.CORRAL_BENCH_APPENDER_TRACE ? join(env.CORRAL_BENCH_APPENDER_TRACE, `appender-${name}-${run}.jsonl`) : undefined)
  if (env.CORRAL_BENCH_LOG_OFF === '1') {
    targets[1]!.appenderPid = await startAppender(dbUrl, ROOT, trace('corral'))
    targets.push(corralTarget('corral-log-off', await startCorral({ root: ROOT, tmp: o.tmp, dataDir, dbUrl: await logOffStore(dbUrl), workers, nodeArgs: o.nodeArgs, env: proxyEnv }), o.corralCa))
  }
  const baseRoot = env.CORRAL_BENCH_BASELINE
  if (baseRoot) {
    const n = Number(env.CORRAL_BENCH_BASELINE_WORKERS ?? 1)
    // CORRAL_BENCH_BASELINE_NODE_ARGS: Node flags for the baseline only (a V8 setting A/B'd on one build: CORRAL_BENCH_BASELINE=. with the flag).
    const baseArgs = [...o.nodeArgs, ...(env.CORRAL_BENCH_BASELINE_NODE_ARGS?.split(' ').filter(Boolean) ?? [])]
    const baseUrl = baselineStore(dbUrl, baseRoot)
    const appenderPid = env.CORRAL_BENCH_LOG_OFF === '1' ? await startAppender(baseUrl, resolve(baseRoot), trace('corral-base')) : undefined
    const p = await startCorral({ root: resolve(baseRoot), tmp: o.tmp, dataDir, dbUrl: baseUrl, ...(n > 1 ? { workers: n } : {}), nodeArgs: baseArgs, env: proxyEnv })
    // CORRAL_BENCH_BASELINE_FIRST=1 measures the baseline before this build (alternate it between runs).
    targets.splice(env.CORRAL_BENCH_BASELINE_FIRST ? 1 : targets.length, 0, { ...corralTarget(n > 1 ? `corral-base-w${n}` : 'corral-base', p, o.corralCa), ...(appenderPid ? { appenderPid } : {}) })
  }
  const peer = (name: string, p: { port: number; caPem: string; pid: number }, offers: { h2: boolean; ws: boolean }): Target => {
    const via: Via = { upstreamCaPem: o.upCa, proxy: { url: `http://127.0.0.1:${p.port}`, caPem: p.caPem } }
    return { name, pid: p.pid, h2: offers.h2 ? via : null, ws: offers.ws ? via : null, dispatcher: (n) => new ProxyAgent({ uri: `http://127.0.0.1:${p.port}`, requestTls: { ca: p.caPem }, ...(n ? { connections: n } : {}) }) }
  }
  const upCaFile = join(o.tmp, 'upca/ca.pem')
  if (ONLY.includes('squid-bump')) {
    const p = await startSquidBump(dir, upCaFile, children).catch((err: Error) => void process.stderr.write(`${err.message}\n`))
    if (p) targets.push(peer(p.name, p, { h2: false, ws: true }))
  }
  if (ONLY.includes('node-floor')) {
    const f = await spawnUntil(process.execPath, [...o.nodeArgs, '--import', 'tsx', join(ROOT, 'bench/node-floor-proxy.ts'), join(dir, 'floorca'), upCaFile], /READY (\d+)/)
    targets.push(peer('node-floor', { port: Number(f.match[1]), pid: f.child.pid!, caPem: readFileSync(join(dir, 'floorca/ca.pem'), 'utf8') }, { h2: true, ws: true }))
  }
  if (ONLY.includes('squid')) {
    const p = await startSquidTunnel(dir, o.upCa, children)
    targets.push({ ...peer(p.name, p, { h2: false, ws: false }), dispatcher: (n) => new ProxyAgent({ uri: `http://127.0.0.1:${p.port}`, ...(n ? { connections: n } : {}) }) })
  }
  if (ONLY.includes('mitmproxy')) {
    const p = await startMitmproxy(dir, upCaFile, children)
    targets.push(peer(p.name, p, { h2: true, ws: true }))
  }
  return targets
}

/** The closed loops, h2 and WebSocket phases of one target. */
async function closedPhases(t: Target, o: Ctx): Promise<Metrics> {
  const pids = t.pid ? [t.pid] : undefined
  const d = t.dispatcher()
  const loop = { seconds: SECONDS, ...(pids ? { pids } : {}) }
  // The mix first, unmeasured: every proxy starts afresh each run, and a Node proxy's CPU per request
  // keeps falling for its first ~10 s of load (corral's from ~1.4 to ~0.45 ms per POST) as V8 optimises.
  await closedLoop(async () => Promise.all([post(d, o.origin), stream(d, o.origin), mcpCall(d, o.origin)]).then(() => {}), { seconds: WARM_SECONDS })
  const p = await closedLoop(() => post(d, o.origin), loop)
  const s = await closedLoop(() => stream(d, o.origin), loop)
  const ttfe = await firstEvent(d, o.origin)
  const mcp = await closedLoop(() => mcpCall(d, o.origin), loop)
  await d.close()
  const note = (phase: string) => (err: Error): null => (process.stderr.write(`${t.name}: ${phase}: ${err.message}\n`), null)
  const h2 = t.h2 ? await measureH2(o.h2Port, t.h2, { seconds: SECONDS, streams: H2_STREAMS, ...(pids ? { pids } : {}) }).catch(note('h2')) : null
  const ws = t.ws ? await measureWebSocket(o.upPort, t.ws, SECONDS).catch(note('websocket')) : null
  return {
    closed_rps: p.rps, closed_p50_ms: p.p50_ms, closed_p99_ms: p.p99_ms, cpu_ms_per_req: p.cpu_ms_per_req,
    // How many cores the target kept busy in that loop (its CPU time over the window).
    closed_cores: p.cpu_ms_per_req === null ? null : round((p.rps * p.cpu_ms_per_req) / 1000, 2),
    sse_rps: s.rps, sse_cpu_ms_per_stream: s.cpu_ms_per_req, ttfe_ms: ttfe,
    mcp_rps: mcp.rps, mcp_p50_ms: mcp.p50_ms, mcp_cpu_ms_per_call: mcp.cpu_ms_per_req,
    h2_rps: h2?.rps ?? null, h2_p50_ms: h2?.p50_ms ?? null, h2_p99_ms: h2?.p99_ms ?? null, h2_cpu_ms_per_req: h2?.cpu_ms_per_req ?? null,
    ws_messages_per_s: ws?.messages_per_s ?? null, ws_rtt_p50_ms: ws?.round_trip_p50_ms ?? null, ws_rtt_p99_ms: ws?.round_trip_p99_ms ?? null,
    errors: p.errors + s.errors + mcp.errors + (h2?.errors ?? 0) + (ws?.errors ?? 0),
  }
}

/** `<key>_added_*` over direct's figure of the same run. */
function added(m: Record<string, Metrics>, keys: string[]): void {
  for (const [name, x] of Object.entries(m)) {
    if (name === 'direct' || name === 'resolver') continue
    for (const k of keys) {
      const a = x[k]
      const b = m.direct?.[k]
      if (typeof a === 'number' && typeof b === 'number') x[k.replace(/_(p\d+_ms)$/, '_added_$1')] = round(a - b, 3)
    }
  }
}

async function oneRun(run: number, o: Ctx): Promise<RunRecord> {
  const mark = children.length
  const started = new Date().toISOString()
  const load0 = loadavg()
  const targets = await startTargets(run, o)
  const m: Record<string, Metrics> = Object.fromEntries(targets.map((t) => [t.name, {}]))
  const windows: NonNullable<RunRecord['windows']> = []
  let third = RATE
  try {
    for (const t of targets) {
      process.stderr.write(`run ${run}: closed loops, h2, WebSocket: ${t.name} …\n`)
      Object.assign(m[t.name]!, await closedPhases(t, o))
    }
    third = Math.max(50, Math.round((m.corral!.closed_rps ?? 150) / 3))
    for (const [key, rate] of [['r500', RATE], ['third', third]] as const) {
      for (const t of targets) {
        process.stderr.write(`run ${run}: ${rate} req/s: ${t.name} …\n`)
        const d = t.dispatcher(CONCURRENCY)
        const tailFile = env.CORRAL_BENCH_TAIL_DIR ? join(env.CORRAL_BENCH_TAIL_DIR, `client-${t.name}-${rate}-${run}.json`) : undefined
        const from = Date.now()
        const r = await fixedRate(d, (x) => post(x, o.origin), { rate, seconds: LATENCY_SECONDS, ...(t.pid ? { pid: t.pid } : {}), ...(tailFile ? { tailFile } : {}) })
        windows.push({ target: t.name, phase: key, from, to: Date.now() })
        await d.close()
        Object.assign(m[t.name]!, { [`${key}_p50_ms`]: r.p50_ms, [`${key}_p99_ms`]: r.p99_ms, [`${key}_achieved_rps`]: r.achieved_rps, [`${key}_cpu_ms_per_req`]: r.cpu_ms_per_req ?? null })
      }
    }
    for (const t of targets) if (t.pid) m[t.name]!.rss_mb = treeRssMb(t.pid)
    // What each costs idle (timers, flushes): a fixed cost that a low request rate spreads over few requests.
    const idle0 = targets.map((t) => (t.pid ? treeCpuMs(t.pid) : 0))
    await new Promise((r) => setTimeout(r, 2000))
    targets.forEach((t, i) => t.pid && (m[t.name]!.idle_cpu_ms_per_s = round((treeCpuMs(t.pid) - idle0[i]!) / 2, 1)))
    const corral = targets[1]!
    if (TRANSPARENT) {
      process.stderr.write(`run ${run}: transparent mode …\n`)
      const tr = await measureTransparent({ tmp: o.tmp, proxyUrl: `http://127.0.0.1:${new URL((corral.ws!.proxy!).url).port}`, corralPid: corral.pid!, token: o.seeded.token, caPem: o.corralCa!, upPort: o.upPort, seconds: SECONDS, rate: RATE, rateSeconds: LATENCY_SECONDS })
      m['corral-connect-netns'] = tr.connect
      m['corral-transparent'] = tr.transparent
      m.resolver = {
        lookup_p50_ms: tr.lookup.corral.p50_ms!, lookup_p99_ms: tr.lookup.corral.p99_ms!, lookup_errors: tr.lookup.corral.errors!,
        stub_lookup_p50_ms: tr.lookup.stub.p50_ms!, stub_lookup_p99_ms: tr.lookup.stub.p99_ms!,
        added_lookup_p50_ms: round(tr.lookup.corral.p50_ms! - tr.lookup.stub.p50_ms!, 3), added_lookup_p99_ms: round(tr.lookup.corral.p99_ms! - tr.lookup.stub.p99_ms!, 3),
      }
      const rf = await resolverFigures(3).catch((err: Error) => (process.stderr.write(`bench/resolver.ts: ${err.message}\n`), {}))
      for (const [k, v] of Object.entries(rf)) m.resolver[`resolver_${k}`] = v
    }
    added(m, ['r500_p50_ms', 'r500_p99_ms', 'third_p50_ms', 'third_p99_ms', 'ws_rtt_p50_ms', 'ws_rtt_p99_ms'])
    process.stderr.write(`run ${run}: ${STREAMS} streams through corral …\n`)
    m.corral!.rss_mb_streams = await rssAtStreams(corral.dispatcher(), o.origin, corral.pid!, STREAMS).catch((err: Error) => (process.stderr.write(`${err.message}\n`), null))
  } finally {
    await stopSince(mark)
  }
  return { run, started, loadavg_before: load0, loadavg_after: loadavg(), third_rate: third, targets: m, windows }
}

/** The same bench under round-robin real-time scheduling (as root), its figures as a second column. */
async function realTimeColumn(tmp: string): Promise<unknown> {
  const out = join(tmp, 'rt.json')
  const child = spawn('chrt', ['-r', '10', process.execPath, '--import', 'tsx', join(ROOT, 'bench/proxy.ts')], { cwd: ROOT, env: { ...env, CORRAL_BENCH_RT: '', CORRAL_BENCH_OUT: out, CORRAL_BENCH_SCHEDULING: 'chrt -r 10' }, stdio: ['ignore', 'inherit', 'inherit'] })
  const code = await new Promise((r) => child.once('exit', r))
  if (code !== 0) throw new Error(`chrt -r 10 bench/proxy.ts exited ${String(code)}`)
  const rt = JSON.parse(readFileSync(out, 'utf8')) as { runs: unknown; spread: unknown; ratios: unknown }
  return { scheduling: 'chrt -r 10', runs: rt.runs, spread: rt.spread, ratios: rt.ratios }
}

async function main(): Promise<void> {
  const tmp = mkdtempSync(join(tmpdir(), 'corral-bench-proxy-'))
  chmodSync(tmp, 0o777)
  const resultsDir = join(ROOT, 'bench/results')
  mkdirSync(resultsDir, { recursive: true })
  try {
    ensurePackages()
    const up = await spawnUntil(process.execPath, ['--import', 'tsx', join(ROOT, 'bench/proxy-upstream.ts'), join(tmp, 'upca')], /READY (\d+) (\d+)/)
    const upPort = Number(up.match[1])
    const h2Port = Number(up.match[2])
    const upCa = readFileSync(join(tmp, 'upca/ca.pem'), 'utf8')
    const seeded = await seed(tmp, upPort, h2Port)
    const nodeArgs = [
      ...(env.CORRAL_BENCH_PROFILE ? ['--cpu-prof', '--cpu-prof-dir', join(resultsDir, 'prof')] : []),
      ...(env.CORRAL_BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? []),
      // CORRAL_BENCH_TAIL_DIR: every proxy and this client record their GC pauses and event-loop stalls there (bench/tail-attribution.ts).
      ...(env.CORRAL_BENCH_TAIL_DIR ? ['--import', join(ROOT, 'bench/tail-probe.mjs')] : []),
      // CORRAL_BENCH_CHURN_DIR (closed mode): every Node proxy counts its per-request churn (bench/churn-probe.mjs).
      ...(env.CORRAL_BENCH_CHURN_DIR ? ['--import', join(ROOT, 'bench/churn-probe.mjs')] : []),
    ]
    // The allocation mode needs the probe in every proxy (its SIGUSR2 heap sampling).
    if (env.CORRAL_BENCH_MODE === 'alloc' && !env.CORRAL_BENCH_TAIL_DIR) {
      env.CORRAL_BENCH_TAIL_DIR = join(tmp, 'probe')
      nodeArgs.push('--import', join(ROOT, 'bench/tail-probe.mjs'))
    }
    if (env.CORRAL_BENCH_TAIL_DIR) {
      mkdirSync(env.CORRAL_BENCH_TAIL_DIR, { recursive: true })
      await import(pathToFileURL(join(ROOT, 'bench/tail-probe.mjs')).href)
    }
    const ctx: Ctx = { tmp, seeded, upPort, h2Port, upCa, origin: `https://127.0.0.1:${upPort}`, nodeArgs }
    if (env.CORRAL_BENCH_MODE === 'rate') {
      const mark = children.length
      await rateRun(await startTargets(0, ctx), (d) => post(d, ctx.origin), resultsDir)
      await stopSince(mark)
      return
    }
    if (env.CORRAL_BENCH_MODE === 'alloc') {
      const mark = children.length
      await allocRun(await startTargets(0, ctx), (d) => post(d, ctx.origin), resultsDir, env.CORRAL_BENCH_TAIL_DIR!)
      await stopSince(mark)
      return
    }
    if (env.CORRAL_BENCH_MODE === 'closed') {
      const mark = children.length
      await closedRun(await startTargets(0, ctx), (d) => post(d, ctx.origin), resultsDir, upPort)
      await stopSince(mark)
      return
    }
    const runs: RunRecord[] = []
    for (let r = 1; r <= RUNS; r++) {
      runs.push(await oneRun(r, ctx))
      printRun(runs[runs.length - 1]!)
    }
    const summary = summarize(runs)
    const rt = env.CORRAL_BENCH_RT === '1' ? await realTimeColumn(tmp) : undefined
    const out = resolve(ROOT, env.CORRAL_BENCH_OUT ?? join(resultsDir, 'proxy.json'))
    const doc = {
      machine: { cpus: cpus().length, node: process.version, scheduling: env.CORRAL_BENCH_SCHEDULING ?? 'ordinary' },
      settings: { runs: RUNS, seconds: SECONDS, latency_seconds: LATENCY_SECONDS, warm_seconds: WARM_SECONDS, concurrency: CONCURRENCY, rate: RATE, h2_streams: H2_STREAMS, workers: Number(env.CORRAL_BENCH_WORKERS ?? 1), peers: ONLY },
      runs, ...summary, ...(rt ? { rt } : {}),
    }
    writeFileSync(out, JSON.stringify(doc, null, 2) + '\n')
    process.stdout.write(`\n${markdownTable(summary, ['direct', 'corral', ...Object.keys(summary.spread).filter((n) => n.startsWith('corral-') && !n.includes('netns') && !n.includes('transparent')), 'squid-bump', 'node-floor'])}\n\nwrote ${out}\n`)
  } finally {
    await stopSince(0)
    rmSync(tmp, { recursive: true, force: true })
  }
}

await main()
process.exit(0)
