// Outbound proxy benchmark (not a test). One process tree on loopback: a keep-alive HTTPS upstream
// (bench/proxy-upstream.ts), `corral proxy` (built binary when dist/ exists, else sources), and the
// peers of bench/proxy-peers.ts: squid as a plain CONNECT tunnel, squid ssl-bump (TLS interception,
// method + path ACL) and mitmproxy as intercepting peers (from the distribution's packages,
// installed with apt-get when missing), `node-floor` (bench/node-floor-proxy.ts: the least a
// TLS-intercepting proxy in Node does, no policy nor audit: corral's cost over it is its own),
// and this process as the load generator (undici with a
// ProxyAgent). Same request mix everywhere: a JSON POST matched by a body CEL rule with two header
// transforms, an injected credential (auth transform) and a request counter with a ceiling, and an
// SSE stream of ~2 KB in 20 events metered by a token counter. Then the MCP phase: JSON-RPC
// tools/call POSTs to /mcp, decided by an `mcp` rule (the arguments validated against the tool's
// input_schema and a typed CEL condition over them), answered as JSON (calls/s, p50 per call).
// Writes bench/results/proxy.json.
//
//   npm run bench:proxy
//   CORRAL_BENCH_SECONDS=10 npm run bench:proxy       # longer closed-loop runs
//   CORRAL_BENCH_PROFILE=1 npm run bench:proxy        # --cpu-prof of the corral proxy → bench/results/prof/
//   CORRAL_BENCH_NODE_ARGS="--max-semi-space-size=64" # Node flags for every corral build measured
//   CORRAL_BENCH_PEERS=squid,squid-bump,node-floor npm run bench:proxy  # only these peers (comma list; '' for none)
//   CORRAL_BENCH_MODE=rate npm run bench:proxy        # only the open loop at a fixed rate (bench/proxy-rate.ts):
//     CORRAL_BENCH_RATE=3000 CORRAL_BENCH_RATE_SECONDS=20 CORRAL_BENCH_CONNECTIONS=32 (the defaults);
//     POSTs only, p50/p99/p99.9 from each request's scheduled start → bench/results/proxy-rate.json
//   CORRAL_BENCH_BASELINE=/path/to/other/checkout  # also measure that build of corral (its dist/,
//     run `npm run build` there first) as `corral-base`, same data and run: before/after side by side
//     (CORRAL_BENCH_BASELINE_FIRST=1 measures it before this build instead of after)
//   CORRAL_BENCH_WORKERS=N                        # this build's `corral proxy --workers N` (default: the
//     command's own default, one worker process per available CPU; a build without the flag runs one process)
//   CORRAL_BENCH_ALSO_WORKERS=N                   # also this build with `--workers N`, as `corral-wN`, same run
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import BetterSqlite3 from 'better-sqlite3'
import { cpus, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { Agent, ProxyAgent, request, type Dispatcher } from 'undici'
import { createAuditWriter } from '../src/audit/index.js'
import { isStaticAuthProvider } from '../src/policy/index.js'
import { OrgMaterialAdmin, Sealer, loadMasterKey } from '../src/secrets/index.js'
import { CapabilityTokens, loadTokenKey } from '../src/secrets/index.js'
import { openStore } from '../src/store/index.js'
import { proxyTables } from '../src/store/proxy-tables.js'
import { CERTGEN, has, startMitmproxy, startSquidBump, startSquidTunnel } from './proxy-peers.js'
import { fixedRate, processTree, treeCpu, type RateResult } from './proxy-rate.js'
import { measureWebSocket } from './proxy-websocket.js'

/** CPU in ms of a process and its children (`corral proxy --workers N`: the primary and its workers). */
const procCpuMs = (pid: number): number => treeCpu(processTree(pid)).total

const ROOT = resolve(import.meta.dirname, '..')
const SECONDS = Number(process.env.CORRAL_BENCH_SECONDS ?? 5)
const CONCURRENCY = 32
const RATE = 500
const STREAMS = 1000
const TARGETS = { vs_squid: 0.4, vs_mitmproxy: 8, added_p50_ms: 0.5, added_p99_ms: 1.5, ttfe_extra_ms: 5, rss_mb: 300 }
const MODE = process.env.CORRAL_BENCH_MODE === 'rate' ? 'rate' : 'full'
const FIXED_RATE = Number(process.env.CORRAL_BENCH_RATE ?? 3000)
const RATE_SECONDS = Number(process.env.CORRAL_BENCH_RATE_SECONDS ?? 20)
const CONNECTIONS = Number(process.env.CORRAL_BENCH_CONNECTIONS ?? 32)

const CAPS = `
- name: llm
  type: http
  allow:
    - name: messages
      domains: ["127.0.0.1:UPSTREAM_PORT"]
      allow_private: ["127.0.0.0/8"]
      methods: [POST]
      paths: ["/v1/messages"]
      request_format: application/json
      match:
        requires_body: true
        expr: request.body.model == "claude-bench" && request.body.max_tokens <= 4096
    - name: mcp
      domains: ["127.0.0.1:UPSTREAM_PORT"]
      allow_private: ["127.0.0.0/8"]
      methods: [POST]
      paths: ["/mcp"]
      mcp:
        tools:
          - name: create_issue
            input_schema: {type: object, properties: {project: {type: string}, title: {type: string}, priority: {type: integer}, labels: {type: array, items: {type: string}}}, required: [project, title], additionalProperties: false}
            when: 'args.project in ["web", "api"] && size(args.title) <= 120 && args.priority >= 2 && args.labels.all(l, l != "security")'
    - name: stream
      domains: ["127.0.0.1:UPSTREAM_PORT"]
      allow_private: ["127.0.0.0/8"]
      methods: [GET]
      paths: ["/v1/stream", "/v1/hold"]
    - name: socket
      domains: ["127.0.0.1:UPSTREAM_PORT"]
      allow_private: ["127.0.0.0/8"]
      methods: [GET]
      paths: ["/v1/ws"]
  transforms:
    - name: version
      header: { name: anthropic-version, action: set, value: '"2023-06-01"' }
    - name: identity
      header: { name: accept-encoding, action: set, value: '"identity"' }
    - name: key
      auth: { credential: anthropic-key, provider: anthropic }
  budgets:
    counters:
      - name: requests
        source: request.count
        workspace: { max: 1000000000 }
      - name: tokens
        source: response
        requires_body: true
        framing: sse
        format: application/json
        encoding: identity
        sse_event: message_delta
        value: event.data.usage.output_tokens
        accumulator: max
        terminal_event_type: message_stop
        status_codes: ["2xx"]
        workspace: { max: 0 }
      - name: ws_messages
        source: websocket.messages
        workspace: { max: 0 }
`

const MCP_BODY = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'create_issue', arguments: { project: 'web', title: 'Flaky login test on CI', priority: 3, labels: ['bug', 'ci'] } } })
const POST_BODY = JSON.stringify({ model: 'claude-bench', max_tokens: 1024, messages: [{ role: 'user', content: 'x'.repeat(400) }] })

interface Target { name: string; /** `connections`: the pool size per origin (undici's default: unlimited) */ dispatcher: (connections?: number) => Dispatcher; pid?: number }
interface Result { cpu_ms_per_req?: number; post_cpu_ms_per_req?: number; throughput_rps: number; p50_ms: number; p99_ms: number; ttfe_ms: number; errors: number; rss_mb_streams?: number; mcp?: McpResult }
interface McpResult { calls_rps: number; p50_ms: number; p99_ms: number; cpu_ms_per_call?: number; errors: number }

const children: ChildProcess[] = []
const cleanup = (): void => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM')
}
process.on('exit', cleanup)

function spawnUntil(cmd: string, args: string[], pattern: RegExp, opts: { env?: NodeJS.ProcessEnv } = {}): Promise<{ child: ChildProcess; match: RegExpExecArray }> {
  const child = spawn(cmd, args, { env: { ...process.env, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] })
  children.push(child)
  let out = ''
  return new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`${cmd} did not start:\n${out}`)), 30_000)
    const on = (c: Buffer): void => {
      out += String(c)
      const m = pattern.exec(out)
      if (m) {
        clearTimeout(timer)
        res({ child, match: m })
      }
    }
    child.stdout!.on('data', on)
    child.stderr!.on('data', on)
    child.once('exit', (code) => rej(new Error(`${cmd} exited ${code}:\n${out}`)))
  })
}

function ensurePackages(): { squid: boolean; mitm: boolean } {
  // squid-openssl, not squid: ssl-bump needs the OpenSSL flavour (and its security_file_certgen);
  // installing `squid` would replace it with the flavour that cannot intercept.
  const bump = (): boolean => has('squid') && existsSync(CERTGEN)
  const missing = [...(bump() ? [] : ['squid-openssl']), ...(has('mitmdump') ? [] : ['mitmproxy'])]
  if (missing.length) {
    process.stderr.write(`installing ${missing.join(' ')} with apt-get …\n`)
    try {
      execFileSync('apt-get', ['install', '-y', '-q', ...missing], { stdio: 'ignore', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } })
    } catch {
      process.stderr.write('apt-get failed; peers that are missing are skipped\n')
    }
  }
  return { squid: has('squid'), mitm: has('mitmdump') }
}

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : NaN
}
const round = (n: number, d = 2): number => Math.round(n * 10 ** d) / 10 ** d

async function post(d: Dispatcher, origin: string): Promise<void> {
  const r = await request(`${origin}/v1/messages`, { dispatcher: d, method: 'POST', headers: { 'content-type': 'application/json' }, body: POST_BODY })
  await r.body.text()
  if (r.statusCode !== 200) throw new Error(`POST ${r.statusCode}`)
}

async function stream(d: Dispatcher, origin: string, onFirst?: () => void): Promise<void> {
  const r = await request(`${origin}/v1/stream`, { dispatcher: d, method: 'GET' })
  if (r.statusCode !== 200) throw new Error(`stream ${r.statusCode}`)
  let first = true
  for await (const _ of r.body) {
    if (first) onFirst?.()
    first = false
  }
}

async function measure(t: Target, origin: string): Promise<Result> {
  let errors = 0
  // Closed loop at concurrency 32, the mix alternating POST and SSE.
  const d1 = t.dispatcher()
  for (let i = 0; i < 64; i++) await (i % 2 ? post(d1, origin) : stream(d1, origin)).catch(() => errors++) // warm-up
  let done = 0
  // The proxy's own CPU per request (user + system, from /proc): steadier than throughput on a
  // shared machine, because it does not depend on how much CPU the other processes leave over.
  const cpu0 = t.pid ? procCpuMs(t.pid) : 0
  const end = Date.now() + SECONDS * 1000
  await Promise.all(Array.from({ length: CONCURRENCY }, async (_, w) => {
    let i = w
    while (Date.now() < end) {
      await (i++ % 2 ? post(d1, origin) : stream(d1, origin)).then(() => done++, () => errors++)
    }
  }))
  const throughput = done / SECONDS
  const cpuPerReq = t.pid && done ? (procCpuMs(t.pid) - cpu0) / done : undefined
  await d1.close()

  // Open loop at a fixed rate: POST latency.
  const d2 = t.dispatcher()
  for (let i = 0; i < 50; i++) await post(d2, origin).catch(() => errors++)
  const lat: number[] = []
  const n = RATE * Math.min(SECONDS, 4)
  // Fixed work (n POSTs at a fixed rate): the proxy's CPU per inspected POST.
  const postCpu0 = t.pid ? procCpuMs(t.pid) : 0
  const start = performance.now()
  const pending: Promise<void>[] = []
  for (let i = 0; i < n; i++) {
    const at = start + (i * 1000) / RATE
    const wait = at - performance.now()
    if (wait > 1) await new Promise((r) => setTimeout(r, wait))
    const t0 = performance.now()
    pending.push(post(d2, origin).then(() => void lat.push(performance.now() - t0), () => void errors++))
  }
  await Promise.all(pending)
  const postCpu = t.pid ? (procCpuMs(t.pid) - postCpu0) / n : undefined
  await d2.close()

  // Time to first SSE event, sequential.
  const d3 = t.dispatcher()
  await stream(d3, origin).catch(() => errors++)
  const ttfe: number[] = []
  for (let i = 0; i < 40; i++) {
    const t0 = performance.now()
    await stream(d3, origin, () => ttfe.push(performance.now() - t0)).catch(() => errors++)
  }
  await d3.close()
  return { ...(cpuPerReq !== undefined ? { cpu_ms_per_req: round(cpuPerReq, 3) } : {}), ...(postCpu !== undefined ? { post_cpu_ms_per_req: round(postCpu, 3) } : {}), throughput_rps: round(throughput, 1), p50_ms: round(pct(lat, 50)), p99_ms: round(pct(lat, 99)), ttfe_ms: round(pct(ttfe, 50)), errors }
}

async function mcpCall(d: Dispatcher, origin: string): Promise<void> {
  const r = await request(`${origin}/mcp`, { dispatcher: d, method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: MCP_BODY })
  const text = await r.body.text()
  if (r.statusCode !== 200 || !text.includes('"result"')) throw new Error(`MCP ${r.statusCode}: ${text.slice(0, 200)}`)
}

/** The MCP phase: tools/call at concurrency 32 in a closed loop, each call decided by the typed policy. */
async function measureMcp(t: Target, origin: string): Promise<McpResult> {
  let errors = 0
  const d = t.dispatcher()
  for (let i = 0; i < 64; i++) await mcpCall(d, origin).catch(() => errors++)
  const lat: number[] = []
  const cpu0 = t.pid ? procCpuMs(t.pid) : 0
  const end = Date.now() + SECONDS * 1000
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (Date.now() < end) {
      const t0 = performance.now()
      await mcpCall(d, origin).then(() => void lat.push(performance.now() - t0), () => void errors++)
    }
  }))
  const cpu = t.pid && lat.length ? (procCpuMs(t.pid) - cpu0) / lat.length : undefined
  await d.close()
  return { calls_rps: round(lat.length / SECONDS, 1), p50_ms: round(pct(lat, 50)), p99_ms: round(pct(lat, 99)), ...(cpu !== undefined ? { cpu_ms_per_call: round(cpu, 3) } : {}), errors }
}

/** Opens STREAMS held SSE streams through a proxy and reads the proxy's resident set size. */
async function rssAtStreams(t: Target, origin: string): Promise<number> {
  const d = t.dispatcher()
  const controllers: AbortController[] = []
  let opened = 0
  const openOne = async (): Promise<void> => {
    const ac = new AbortController()
    controllers.push(ac)
    const r = await request(`${origin}/v1/hold`, { dispatcher: d, signal: ac.signal })
    await new Promise<void>((res) => r.body.once('data', () => res()))
    r.body.on('data', () => {}).on('error', () => {})
    opened++
  }
  // In waves of 100, like agents ramping up (and within the listen backlog); all stay open.
  for (let i = 0; i < STREAMS; i += 100) await Promise.all(Array.from({ length: Math.min(100, STREAMS - i) }, openOne))
  // Summed over the proxy's processes (its workers too).
  let rss = 0
  for (const p of processTree(t.pid!)) rss += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))![1]) / 1024
  for (const ac of controllers) ac.abort()
  await d.destroy().catch(() => {})
  if (opened !== STREAMS) throw new Error(`only ${opened} streams opened`)
  return round(rss, 1)
}

/**
 * The fixed-rate run: each target in turn (direct first), POSTs only, open loop. Reports each
 * target's percentiles and every proxy's ADDED latency over direct in the same run, with the load
 * the machine was under (load average before and after, the proxy's own CPU per request).
 */
async function rateRun(targets: Target[], origin: string, resultsDir: string): Promise<void> {
  const load0 = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number)
  const results: Record<string, RateResult> = {}
  for (const t of targets) {
    process.stderr.write(`fixed rate ${FIXED_RATE}/s × ${RATE_SECONDS} s over ${CONNECTIONS} connections: ${t.name} …\n`)
    const d = t.dispatcher(CONNECTIONS)
    // CORRAL_BENCH_PERF=1: `perf record` of each target with a pid over its window → bench/results/prof/perf-<name>.data
    const perfData = process.env.CORRAL_BENCH_PERF && t.pid ? join(resultsDir, 'prof', `perf-${t.name}.data`) : undefined
    if (perfData) mkdirSync(join(resultsDir, 'prof'), { recursive: true })
    results[t.name] = await fixedRate(d, (x) => post(x, origin), { rate: FIXED_RATE, seconds: RATE_SECONDS, ...(t.pid ? { pid: t.pid } : {}), ...(perfData ? { perfData } : {}) })
    await d.close()
  }
  const direct = results.direct!
  const added = Object.fromEntries(Object.entries(results).filter(([n]) => n !== 'direct').map(([n, r]) => [n, {
    p50_ms: round(r.p50_ms - direct.p50_ms), p99_ms: round(r.p99_ms - direct.p99_ms), p999_ms: round(r.p999_ms - direct.p999_ms),
  }]))
  const bump = added['squid-bump']
  const out = {
    machine: { cpus: cpus().length, node: process.version, loadavg_before: load0, loadavg_after: readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number) },
    rate: FIXED_RATE, seconds: RATE_SECONDS, connections: CONNECTIONS, request: 'POST /v1/messages (body CEL match, 2 header transforms, injected credential, request counter with a ceiling)',
    results, added_over_direct: added,
    target: 'corral added p99 ≤ squid-bump added p99, same run',
    met: bump && added.corral ? added.corral.p99_ms <= bump.p99_ms : null,
  }
  writeFileSync(join(resultsDir, 'proxy-rate.json'), JSON.stringify(out, null, 2) + '\n')
  for (const [name, r] of Object.entries(results)) {
    const a = added[name]
    process.stdout.write(`${name.padEnd(11)} ${String(r.achieved_rps).padStart(7)} req/s  p50 ${String(r.p50_ms).padStart(6)}  p99 ${String(r.p99_ms).padStart(7)}  p99.9 ${String(r.p999_ms).padStart(7)}  max ${String(r.max_ms).padStart(7)} ms  errors ${r.errors}${a ? `  added p99 ${a.p99_ms} ms` : ''}${r.cpu_ms_per_req !== undefined ? `  cpu ${r.cpu_ms_per_req} ms/req (main threads ${r.main_cpu_ms_per_req}, busiest loop ${Math.round((r.main_busy_max ?? 0) * 100)} %, ${r.processes} process${r.processes === 1 ? '' : 'es'})` : ''}  generator ${r.generator_cpu_ms_per_req} ms/req\n`)
  }
  for (const [name, r] of Object.entries(results)) {
    if (r.threads_ms_per_req) process.stdout.write(`  ${name} threads ms/req: ${Object.entries(r.threads_ms_per_req).map(([k, v]) => `${k} ${v}`).join(', ')}\n`)
  }
  process.stdout.write(`load average ${out.machine.loadavg_before.join(' ')} → ${out.machine.loadavg_after.join(' ')}; target met: ${out.met}\nwrote bench/results/proxy-rate.json\n`)
}

/**
 * The baseline's own copy of the seeded store: an older build refuses a database that ran
 * migrations it does not know, so they are forgotten in the copy (the columns they added stay;
 * older code does not read them).
 */
function baselineStore(dbUrl: string, baseRoot: string): string {
  const file = dbUrl.slice('sqlite:'.length)
  const copy = `${file}.base.db`
  copyFileSync(file, copy)
  const known = new Set(readdirSync(join(resolve(baseRoot), 'dist/store/migrations')).filter((f) => f.endsWith('.js')).map((f) => f.slice(0, -3)))
  const db = new BetterSqlite3(copy)
  for (const { name } of db.prepare('SELECT name FROM kysely_migration').all() as { name: string }[]) {
    if (!known.has(name)) db.prepare('DELETE FROM kysely_migration WHERE name = ?').run(name)
  }
  db.close()
  return `sqlite:${copy}`
}

async function main(): Promise<void> {
  const tmp = mkdtempSync(join(tmpdir(), 'corral-bench-proxy-'))
  chmodSync(tmp, 0o777)
  const resultsDir = join(ROOT, 'bench/results')
  mkdirSync(resultsDir, { recursive: true })
  try {
    const only = process.env.CORRAL_BENCH_PEERS?.split(',').map((s) => s.trim())
    const found = ensurePackages()
    const peers = {
      squid: found.squid && (!only || only.includes('squid')),
      bump: found.squid && (!only || only.includes('squid-bump')),
      mitm: found.mitm && (!only || only.includes('mitmproxy')),
      floor: !only || only.includes('node-floor'),
    }
    const up = await spawnUntil(process.execPath, ['--import', 'tsx', join(ROOT, 'bench/proxy-upstream.ts'), join(tmp, 'upca')], /READY (\d+)/)
    const upPort = Number(up.match[1])
    const origin = `https://127.0.0.1:${upPort}`
    const upCa = readFileSync(join(tmp, 'upca/ca.pem'), 'utf8')

    // Seed a workspace, its secret material and a capability token, as the control plane would.
    const dataDir = join(tmp, 'data')
    const dbUrl = `sqlite:${join(tmp, 'corral.db')}`
    const store = await openStore(dbUrl)
    const org = (await store.orgs.create({ name: 'bench' }))!
    const t = proxyTables(store.db)
    const prov = await t.workspaces.createProvider(org.id, { name: 'anthropic' })
    const role = await t.workspaces.createRole(org.id, { name: 'bench', provider_id: prov, capabilities: CAPS.replaceAll('UPSTREAM_PORT', String(upPort)) })
    const ws = await t.workspaces.create(org.id, { role_id: role, created_by_user_id: 'usr_bench' })
    const audit = createAuditWriter(store)
    await new OrgMaterialAdmin(store, new Sealer(await loadMasterKey(dataDir)), audit, isStaticAuthProvider)
      .createCredential({ orgId: org.id, userId: 'usr_bench' }, { name: 'anthropic-key', provider: 'anthropic', kind: 'static_token', token: 'sk-bench' })
    const token = (await new CapabilityTokens(await loadTokenKey(store.settings)).mint({ org_id: org.id, workspace_id: ws }, 3600)).token
    await audit.close()
    await store.close()

    const built = existsSync(join(ROOT, 'dist/commands/proxy.js'))
    const nodeArgs = [
      ...(process.env.CORRAL_BENCH_PROFILE ? ['--cpu-prof', '--cpu-prof-dir', join(resultsDir, 'prof')] : []),
      // Node flags for every corral build measured (e.g. a V8 heap setting), CORRAL_BENCH_NODE_ARGS="--flag …".
      ...(process.env.CORRAL_BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? []),
    ]
    const entry = built ? [join(ROOT, 'bin/run.js')] : ['--import', 'tsx', join(ROOT, 'bin/dev.js')]
    // The stream phase holds STREAMS streams of one workspace open at once: the per-workspace
    // limits (256 tunnels and 256 requests in flight by default, src/proxy/limits.ts) would refuse
    // them with 429, so both corral builds run with room for all of them (squid and mitmproxy have none).
    const proxyEnv = { CORRAL_LOG_LEVEL: 'warn', CORRAL_PROXY_MAX_CONNECTIONS_PER_WORKSPACE: String(STREAMS + 100), CORRAL_PROXY_MAX_INFLIGHT_PER_WORKSPACE: String(STREAMS + 100) }
    const workers = process.env.CORRAL_BENCH_WORKERS ? ['--workers', process.env.CORRAL_BENCH_WORKERS] : []
    const corral = await spawnUntil(process.execPath, [...nodeArgs, ...entry, 'proxy', ...workers, '--data-dir', dataDir, '--db', dbUrl, '--port', '0', '--upstream-ca', join(tmp, 'upca/ca.pem')], /ready: (http:\/\/\S+)/, { env: proxyEnv })
    const corralUrl = corral.match[1]!
    const corralCa = readFileSync(join(dataDir, 'ca.pem'), 'utf8')
    const baseRoot = process.env.CORRAL_BENCH_BASELINE
    const base = baseRoot
      ? await spawnUntil(process.execPath, [...nodeArgs, join(resolve(baseRoot), 'bin/run.js'), 'proxy', '--data-dir', dataDir, '--db', baselineStore(dbUrl, baseRoot), '--port', '0', '--upstream-ca', join(tmp, 'upca/ca.pem')], /ready: (http:\/\/\S+)/, { env: proxyEnv })
      : undefined

    const targets: Target[] = [
      { name: 'direct', dispatcher: (n) => new Agent({ connect: { ca: upCa }, ...(n ? { connections: n } : {}) }) },
      { name: 'corral', pid: corral.child.pid!, dispatcher: (n) => new ProxyAgent({ uri: corralUrl, token: `Bearer ${token}`, requestTls: { ca: corralCa }, ...(n ? { connections: n } : {}) }) },
    ]
    if (base) {
      const url = base.match[1]!
      // Measured right after direct, before this build, with CORRAL_BENCH_BASELINE_FIRST=1 (order effects on a busy machine).
      const at = process.env.CORRAL_BENCH_BASELINE_FIRST ? 1 : targets.length
      targets.splice(at, 0, { name: 'corral-base', pid: base.child.pid!, dispatcher: (n) => new ProxyAgent({ uri: url, token: `Bearer ${token}`, requestTls: { ca: corralCa }, ...(n ? { connections: n } : {}) }) })
    }
    // The same build in another process layout, same run: `corral-w<N>` (CORRAL_BENCH_ALSO_WORKERS=1
    // puts one single-process proxy next to the default workers).
    const also = process.env.CORRAL_BENCH_ALSO_WORKERS
    if (also) {
      const p = await spawnUntil(process.execPath, [...nodeArgs, ...entry, 'proxy', '--workers', also, '--data-dir', dataDir, '--db', dbUrl, '--port', '0', '--upstream-ca', join(tmp, 'upca/ca.pem')], /ready: (http:\/\/\S+)/, { env: proxyEnv })
      const url = p.match[1]!
      targets.push({ name: `corral-w${also}`, pid: p.child.pid!, dispatcher: (n) => new ProxyAgent({ uri: url, token: `Bearer ${token}`, requestTls: { ca: corralCa }, ...(n ? { connections: n } : {}) }) })
    }
    const viaPeer = (p: { port: number; caPem: string }) => (n?: number) => new ProxyAgent({ uri: `http://127.0.0.1:${p.port}`, requestTls: { ca: p.caPem }, ...(n ? { connections: n } : {}) })
    const upCaFile = join(tmp, 'upca/ca.pem')
    if (peers.squid) {
      const p = await startSquidTunnel(tmp, upCa, children)
      targets.push({ name: p.name, pid: p.pid, dispatcher: viaPeer(p) })
    }
    if (peers.bump) {
      const p = await startSquidBump(tmp, upCaFile, children).catch((err: Error) => void process.stderr.write(`${err.message}\n`))
      if (p) targets.push({ name: p.name, pid: p.pid, dispatcher: viaPeer(p) })
    }
    if (peers.mitm) {
      const p = await startMitmproxy(tmp, upCaFile, children)
      targets.push({ name: p.name, pid: p.pid, dispatcher: viaPeer(p) })
    }
    if (peers.floor) {
      // Node's own floor for interception (bench/node-floor-proxy.ts): no policy, no audit.
      const f = await spawnUntil(process.execPath, [...nodeArgs, '--import', 'tsx', join(ROOT, 'bench/node-floor-proxy.ts'), join(tmp, 'floorca'), upCaFile], /READY (\d+)/)
      const p = { port: Number(f.match[1]), caPem: readFileSync(join(tmp, 'floorca/ca.pem'), 'utf8') }
      targets.push({ name: 'node-floor', pid: f.child.pid!, dispatcher: viaPeer(p) })
    }
    if (MODE === 'rate') {
      await rateRun(targets, origin, resultsDir)
      return
    }

    const results: Record<string, Result> = {}
    for (const target of targets) {
      process.stderr.write(`measuring ${target.name} …\n`)
      results[target.name] = await measure(target, origin)
    }
    // WebSocket: one socket, direct and through this build (a metered websocket.messages counter).
    process.stderr.write('measuring WebSocket direct and through corral …\n')
    const wsDirect = await measureWebSocket(upPort, { upstreamCaPem: upCa }, SECONDS)
    const wsCorral = await measureWebSocket(upPort, { upstreamCaPem: upCa, proxy: { url: corralUrl, token, caPem: corralCa } }, SECONDS)
    for (const target of targets) {
      process.stderr.write(`MCP calls through ${target.name} …\n`)
      results[target.name]!.mcp = await measureMcp(target, origin)
    }
    process.stderr.write(`opening ${STREAMS} streams through corral …\n`)
    results.corral!.rss_mb_streams = await rssAtStreams(targets[1]!, origin)

    const d = results.direct!
    const c = results.corral!
    const summary = {
      machine: { cpus: cpus().length, node: process.version, loadavg: readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number) },
      seconds: SECONDS,
      results,
      corral_vs_squid_throughput: results.squid ? round(c.throughput_rps / results.squid.throughput_rps) : null,
      corral_vs_mitmproxy_throughput: results.mitmproxy ? round(c.throughput_rps / results.mitmproxy.throughput_rps) : null,
      added_latency_ms: { p50: round(c.p50_ms - d.p50_ms), p99: round(c.p99_ms - d.p99_ms) },
      ttfe_extra_ms: round(c.ttfe_ms - d.ttfe_ms),
      websocket: { direct: wsDirect, corral: wsCorral, added_round_trip_p50_ms: round(wsCorral.round_trip_p50_ms - wsDirect.round_trip_p50_ms, 3), added_round_trip_p99_ms: round(wsCorral.round_trip_p99_ms - wsDirect.round_trip_p99_ms, 3) },
      targets: TARGETS,
    }
    const met = {
      vs_squid: summary.corral_vs_squid_throughput === null ? null : summary.corral_vs_squid_throughput >= TARGETS.vs_squid,
      vs_mitmproxy: summary.corral_vs_mitmproxy_throughput === null ? null : summary.corral_vs_mitmproxy_throughput >= TARGETS.vs_mitmproxy,
      added_p50: summary.added_latency_ms.p50 <= TARGETS.added_p50_ms,
      added_p99: summary.added_latency_ms.p99 <= TARGETS.added_p99_ms,
      ttfe: summary.ttfe_extra_ms <= TARGETS.ttfe_extra_ms,
      rss: (c.rss_mb_streams ?? Infinity) <= TARGETS.rss_mb,
    }
    writeFileSync(join(resultsDir, 'proxy.json'), JSON.stringify({ ...summary, met }, null, 2) + '\n')
    const rows = Object.entries(results).map(([name, r]) => `${name.padEnd(10)} ${String(r.throughput_rps).padStart(8)} req/s  p50 ${String(r.p50_ms).padStart(6)} ms  p99 ${String(r.p99_ms).padStart(6)} ms  first event ${String(r.ttfe_ms).padStart(6)} ms  errors ${r.errors}${r.cpu_ms_per_req !== undefined ? `  cpu ${r.cpu_ms_per_req} ms/req (POST at ${RATE}/s: ${r.post_cpu_ms_per_req})` : ''}`)
    process.stdout.write(`${rows.join('\n')}\n`)
    const mcpRows = Object.entries(results).map(([name, r]) => `${name.padEnd(10)} MCP ${String(r.mcp?.calls_rps).padStart(8)} calls/s  p50 ${String(r.mcp?.p50_ms).padStart(6)} ms  p99 ${String(r.mcp?.p99_ms).padStart(6)} ms  errors ${r.mcp?.errors}${r.mcp?.cpu_ms_per_call !== undefined ? `  cpu ${r.mcp.cpu_ms_per_call} ms/call` : ''}`)
    process.stdout.write(`${mcpRows.join('\n')}\n`)
    process.stdout.write(`corral/squid ${summary.corral_vs_squid_throughput}  corral/mitmproxy ${summary.corral_vs_mitmproxy_throughput}  added p50 ${summary.added_latency_ms.p50} ms  p99 ${summary.added_latency_ms.p99} ms  first-event extra ${summary.ttfe_extra_ms} ms  RSS@${STREAMS} streams ${c.rss_mb_streams} MB\n`)
    process.stdout.write(`websocket  direct ${wsDirect.messages_per_s} msg/s rtt p50 ${wsDirect.round_trip_p50_ms} ms  corral ${wsCorral.messages_per_s} msg/s rtt p50 ${wsCorral.round_trip_p50_ms} ms p99 ${wsCorral.round_trip_p99_ms} ms (added p50 ${summary.websocket.added_round_trip_p50_ms} ms)\n`)
    process.stdout.write(`targets met: ${JSON.stringify(met)}\nwrote bench/results/proxy.json\n`)
  } finally {
    cleanup()
    // Let the children exit cleanly (the corral proxy writes its --cpu-prof on exit).
    await Promise.all(children.map((c) => (c.exitCode !== null ? undefined : new Promise((r) => { c.once('exit', r); setTimeout(r, 8_000) }))))
    rmSync(tmp, { recursive: true, force: true })
  }
}

await main()
process.exit(0)
