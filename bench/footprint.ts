// Memory footprint benchmark (not a test): resident set size of `corral serve` (plain, and as
// `corral dev` / `npm start` runs it: serve plus the fake model in one process), of `corral proxy`
// alone, and of a bare fastify process (one JSON route), all in one run on this machine.
//
//   idle    every process started together on a prepared data dir (its second start: CA, keys and
//           store exist), RSS read 5 s after its ready line (`fresh`) and after SETTLE seconds of
//           nothing (`idle`: V8's memory reducer has run by then and shrunk the young generation)
//   loaded  one process at a time (each next to its baseline, alternating which goes first): POSTs through its proxy at RATE req/s for LOAD seconds (open
//           loop, bench/proxy-rate.ts; bench:proxy's realistic policy, bench/proxy-setup.ts: body
//           CEL match, two header transforms, an injected credential, a request counter) and, for
//           serve and dev, an API client at 20 req/s (GET /v1/audit and /v1/workspaces with the
//           owner key); bare fastify gets GETs at RATE.
//           RSS sampled every 200 ms during the load (`during_max`, `during_mean`), 5 s after it
//           (`after`) and SETTLE seconds after it (`after_settled`)
//
// RSS is split into anonymous memory (the process's own: V8 heap, malloc, stacks) and file pages
// (mostly the node binary's code, shared and reclaimable). Writes bench/results/footprint.json.
//
//   npm run bench:footprint
//   CORRAL_BENCH_BASELINE=/path/to/other/checkout   # also that build (its dist/) as serve-base, dev-base, proxy-base
//   CORRAL_BENCH_NODE_ARGS="--max-semi-space-size=4" # Node flags for every corral process
//   CORRAL_BENCH_RATE=1000 CORRAL_BENCH_LOAD_SECONDS=20 CORRAL_BENCH_SETTLE_SECONDS=75 (the defaults)
//   CORRAL_BENCH_ONLY=serve,serve-base                # only these processes (names as in the table)
//   CORRAL_BENCH_OUT=footprint-ab.json                # the results file's name under bench/results/
import { spawn, type ChildProcess } from 'node:child_process'
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { Agent, ProxyAgent, request, type Dispatcher } from 'undici'
import { fixedRate, processTree, treeCpu } from './proxy-rate.js'
import { benchCapabilities, seedWorkspace } from './proxy-setup.js'

const ROOT = resolve(import.meta.dirname, '..')
const RATE = Number(process.env.CORRAL_BENCH_RATE ?? 1000)
const LOAD_SECONDS = Number(process.env.CORRAL_BENCH_LOAD_SECONDS ?? 20)
const SETTLE_SECONDS = Number(process.env.CORRAL_BENCH_SETTLE_SECONDS ?? 75)
const NODE_ARGS = process.env.CORRAL_BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? []
const ONLY = process.env.CORRAL_BENCH_ONLY?.split(',').filter(Boolean)
const OUT = process.env.CORRAL_BENCH_OUT ?? 'footprint.json'
const TARGETS_MB = { serve_idle: 80, serve_loaded: 100 }

const POST_BODY = JSON.stringify({ model: 'claude-bench', max_tokens: 1024, messages: [{ role: 'user', content: 'x'.repeat(400) }] })
const BARE_FASTIFY = `
import Fastify from 'fastify'
const app = Fastify()
app.get('/v1/ping', async () => ({ ok: true, at: Date.now() }))
await app.listen({ port: 0, host: '127.0.0.1' })
process.stdout.write('ready: http://127.0.0.1:' + app.server.address().port + '\\n')
`

interface Rss { rss_mb: number; anon_mb: number; file_mb: number; threads: number }
interface Proc { name: string; child: ChildProcess; ready: string; dataDir?: string; /** the proxy's URL (bare fastify: its own) */ proxyUrl: string; apiUrl?: string; adminKey?: string; token?: string }

const children: ChildProcess[] = []
process.on('exit', () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL')
})
const round = (n: number, d = 1): number => Math.round(n * 10 ** d) / 10 ** d
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))
const loadavg = (): number[] => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number)

/** VmRSS, RssAnon, RssFile (MB) and threads of a process and its children. */
function rssOf(pid: number): Rss {
  const out = { rss_mb: 0, anon_mb: 0, file_mb: 0, threads: 0 }
  for (const p of processTree(pid)) {
    const status = readFileSync(`/proc/${p}/status`, 'utf8')
    const kb = (k: string): number => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(status)?.[1] ?? 0)
    out.rss_mb += kb('VmRSS') / 1024
    out.anon_mb += kb('RssAnon') / 1024
    out.file_mb += (kb('RssFile') + kb('RssShmem')) / 1024
    out.threads += kb('Threads')
  }
  return { rss_mb: round(out.rss_mb), anon_mb: round(out.anon_mb), file_mb: round(out.file_mb), threads: out.threads }
}

/** Spawns node with `args` and resolves once its output matches `ready` (serve and dev run with --json). */
function start(name: string, args: string[], ready: RegExp, env: NodeJS.ProcessEnv = {}): Promise<{ child: ChildProcess; match: RegExpExecArray }> {
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, CORRAL_LOG_LEVEL: 'warn', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  children.push(child)
  let out = ''
  return new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`${name} did not start:\n${out}`)), 90_000)
    const on = (c: Buffer): void => {
      out += String(c)
      const m = ready.exec(out)
      if (!m) return
      clearTimeout(timer)
      child.stdout!.removeListener('data', on)
      child.stderr!.removeListener('data', on)
      // Keep draining its output: a full pipe would block the process.
      child.stdout!.resume()
      child.stderr!.resume()
      res({ child, match: m })
    }
    child.stdout!.on('data', on)
    child.stderr!.on('data', on)
    child.once('exit', (code) => rej(new Error(`${name} exited ${code}:\n${out}`)))
  })
}

const READY_JSON = /\{"event":"ready"[^\n]*\n/
const READY_PROXY = /ready: (http:\/\/\S+)/

/** Starts a spec on its data dir; corral's ready line (JSON for serve and dev) names its URLs. */
async function launch(s: Spec, dataDir: string, upCaFile: string, env: NodeJS.ProcessEnv): Promise<Proc> {
  const json = s.kind === 'serve' || s.kind === 'dev'
  const { child, match } = await start(s.name, [...argsOf(s, dataDir, upCaFile), ...(json ? ['--json'] : [])], json ? READY_JSON : READY_PROXY, env)
  if (!json) return { name: s.name, child, ready: match[0], proxyUrl: match[1]!, ...(s.kind === 'proxy' ? { dataDir } : {}) }
  const r = JSON.parse(match[0]) as { api_url: string; proxy_url: string }
  return { name: s.name, child, ready: match[0], dataDir, proxyUrl: r.proxy_url, apiUrl: r.api_url.replace(/\/v1$/, ''), adminKey: readFileSync(join(dataDir, 'admin.key'), 'utf8').trim() }
}

async function stop(p: Proc): Promise<void> {
  if (p.child.exitCode !== null) return
  const exited = new Promise((r) => p.child.once('exit', r))
  p.child.kill('SIGTERM')
  await Promise.race([exited, sleep(25_000)])
}

interface Spec { name: string; root: string; kind: 'serve' | 'dev' | 'proxy' | 'fastify' }

/** Command line of a spec; serve and dev on their data dir, proxy on its own store in its data dir. */
function argsOf(s: Spec, dataDir: string, upCaFile: string): string[] {
  const bin = join(s.root, 'bin/run.js')
  if (s.kind === 'fastify') return ['--input-type=module', '-e', BARE_FASTIFY]
  const common = ['--port', '0', '--data-dir', dataDir]
  if (s.kind === 'proxy') return [...NODE_ARGS, bin, 'proxy', ...common, '--upstream-ca', upCaFile]
  if (s.kind === 'dev') return [...NODE_ARGS, bin, 'dev', ...common, '--runtime', 'process', '--allow-unenforced-limits']
  return [...NODE_ARGS, bin, 'serve', ...common, '--allow-unenforced-limits']
}

async function apiClient(p: Proc, until: () => boolean): Promise<{ requests: number; errors: number }> {
  const d = new Agent({ connections: 2 })
  let requests = 0
  let errors = 0
  const headers = { authorization: `Bearer ${p.adminKey}` }
  for (let i = 0; !until(); i++) {
    const t0 = performance.now()
    const path = i % 2 ? '/v1/workspaces' : '/v1/audit?limit=100'
    await request(`${p.apiUrl}${path}`, { dispatcher: d, headers }).then(async (r) => {
      await r.body.text()
      if (r.statusCode === 200) requests++
      else errors++
    }, () => void errors++)
    await sleep(Math.max(0, 50 - (performance.now() - t0)))
  }
  await d.close()
  return { requests, errors }
}

async function loaded(p: Proc, upOrigin: string, corralCa: string | undefined): Promise<Record<string, unknown>> {
  const pid = p.child.pid!
  const samples: Rss[] = []
  let loading = true
  const sampler = (async () => {
    while (loading) {
      samples.push(rssOf(pid))
      await sleep(200)
    }
  })()
  const cpu0 = treeCpu(processTree(pid)).total
  const api = p.adminKey ? apiClient(p, () => !loading) : undefined
  let rate
  if (p.token) {
    const d = new ProxyAgent({ uri: p.proxyUrl!, token: `Bearer ${p.token}`, requestTls: { ca: corralCa! }, connections: 32 })
    const post = async (x: Dispatcher): Promise<void> => {
      const r = await request(`${upOrigin}/v1/messages`, { dispatcher: x, method: 'POST', headers: { 'content-type': 'application/json' }, body: POST_BODY })
      await r.body.text()
      if (r.statusCode !== 200) throw new Error(`POST ${r.statusCode}`)
    }
    rate = await fixedRate(d, post, { rate: RATE, seconds: LOAD_SECONDS, pid })
    await d.close()
  } else {
    const d = new Agent({ connections: 32 })
    rate = await fixedRate(d, async (x) => {
      const r = await request(`${p.proxyUrl}/v1/ping`, { dispatcher: x })
      await r.body.text()
    }, { rate: RATE, seconds: LOAD_SECONDS, pid })
    await d.close()
  }
  loading = false
  await sampler
  const apiDone = await api
  const cpuMs = treeCpu(processTree(pid)).total - cpu0
  await sleep(5000)
  const after = rssOf(pid)
  await sleep((SETTLE_SECONDS - 5) * 1000)
  return {
    achieved_rps: rate.achieved_rps, errors: rate.errors, p99_ms: rate.p99_ms, cpu_ms_per_req: round(cpuMs / Math.max(1, rate.sent), 3),
    ...(apiDone ? { api_requests: apiDone.requests, api_errors: apiDone.errors } : {}),
    during_max: samples.reduce((m, s) => (s.rss_mb > m.rss_mb ? s : m), samples[0]!),
    during_mean_mb: round(samples.reduce((a, s) => a + s.rss_mb, 0) / samples.length),
    after, after_settled: rssOf(pid), loadavg: loadavg(),
  }
}

async function main(): Promise<void> {
  const tmp = mkdtempSync(join(tmpdir(), 'corral-bench-footprint-'))
  chmodSync(tmp, 0o777)
  const resultsDir = join(ROOT, 'bench/results')
  mkdirSync(resultsDir, { recursive: true })
  try {
    const up = await start('upstream', ['--import', 'tsx', join(ROOT, 'bench/proxy-upstream.ts'), join(tmp, 'upca')], /READY (\d+)/)
    const upPort = Number(up.match[1])
    const upOrigin = `https://127.0.0.1:${upPort}`
    const upCaFile = join(tmp, 'upca/ca.pem')
    // `corral dev` saves a CLI profile: in this run's own config dir, not the user's.
    const env = { XDG_CONFIG_HOME: join(tmp, 'config'), CORRAL_UPSTREAM_CA: upCaFile }
    const base = process.env.CORRAL_BENCH_BASELINE ? resolve(process.env.CORRAL_BENCH_BASELINE) : undefined
    const all: Spec[] = [
      { name: 'fastify', root: ROOT, kind: 'fastify' },
      { name: 'serve', root: ROOT, kind: 'serve' }, { name: 'dev', root: ROOT, kind: 'dev' }, { name: 'proxy', root: ROOT, kind: 'proxy' },
      ...(base ? (['serve', 'dev', 'proxy'] as const).map((kind) => ({ name: `${kind}-base`, root: base, kind })) : []),
    ]
    const specs = all.filter((s) => !ONLY || ONLY.includes(s.name))

    // Prepare each data dir with a first start (CA, keys, store, owner key), then seed its bench workspace.
    const tokens = new Map<string, string>()
    for (const s of specs.filter((x) => x.kind !== 'fastify')) {
      process.stderr.write(`preparing ${s.name} …\n`)
      const dir = join(tmp, s.name)
      await stop(await launch(s, dir, upCaFile, env))
      tokens.set(s.name, (await seedWorkspace(`sqlite:${join(dir, 'corral.db')}`, dir, benchCapabilities(upPort))).token)
    }

    process.stderr.write(`idle: every process started together, ${SETTLE_SECONDS} s …\n`)
    const procs = await Promise.all(specs.map((s) => launch(s, join(tmp, s.name), upCaFile, env)))
    await sleep(5000)
    const fresh = new Map(procs.map((p) => [p.name, rssOf(p.child.pid!)]))
    await sleep((SETTLE_SECONDS - 5) * 1000)
    const idle = new Map(procs.map((p) => [p.name, rssOf(p.child.pid!)]))
    const idleLoad = loadavg()

    const results: Record<string, unknown> = {}
    for (const p of loadOrder(procs)) {
      const token = tokens.get(p.name)
      if (token) p.token = token
      process.stderr.write(`loaded: ${p.name}, ${RATE} req/s for ${LOAD_SECONDS} s …\n`)
      const load = await loaded(p, upOrigin, p.dataDir ? readFileSync(join(p.dataDir, 'ca.pem'), 'utf8') : undefined)
      results[p.name] = { fresh: fresh.get(p.name), idle: idle.get(p.name), loaded: load }
      const l = load as { during_max: Rss; after: Rss; after_settled: Rss; achieved_rps: number; cpu_ms_per_req: number; errors: number }
      process.stdout.write(`${p.name.padEnd(11)} fresh ${fmt(fresh.get(p.name)!)}  idle ${fmt(idle.get(p.name)!)}  loaded max ${fmt(l.during_max)}  after ${fmt(l.after)}  settled ${fmt(l.after_settled)}  (${l.achieved_rps} req/s, ${l.cpu_ms_per_req} ms cpu/req, ${l.errors} errors)\n`)
    }
    for (const p of procs) await stop(p)
    const serve = results.serve as { idle: Rss; loaded: { during_max: Rss } } | undefined
    const out = {
      machine: { cpus: cpus().length, node: process.version, loadavg_idle: idleLoad, loadavg_end: loadavg() },
      rate: RATE, load_seconds: LOAD_SECONDS, settle_seconds: SETTLE_SECONDS, node_args: NODE_ARGS,
      results,
      targets_mb: TARGETS_MB,
      met: serve && { serve_idle: serve.idle.rss_mb <= TARGETS_MB.serve_idle, serve_loaded: serve.loaded.during_max.rss_mb <= TARGETS_MB.serve_loaded },
    }
    mkdirSync(dirname(resolve(resultsDir, OUT)), { recursive: true })
    writeFileSync(resolve(resultsDir, OUT), JSON.stringify(out, null, 2) + '\n')
    process.stdout.write(`load average ${idleLoad.join(' ')} (idle phase) → ${out.machine.loadavg_end.join(' ')}; targets met: ${JSON.stringify(out.met)}\nwrote bench/results/${OUT}\n`)
  } finally {
    for (const c of children) if (c.exitCode === null) c.kill('SIGTERM')
    await sleep(500)
    rmSync(tmp, { recursive: true, force: true })
  }
}

/**
 * The loaded phases one process at a time, each build next to its baseline, which of the two goes
 * first alternating from kind to kind (serve, serve-base, dev-base, dev, proxy, proxy-base): a pair
 * runs under nearly the same machine load, and neither build always runs first.
 */
function loadOrder(procs: Proc[]): Proc[] {
  const out: Proc[] = []
  let flip = false
  for (const p of procs) {
    if (p.name.endsWith('-base') || out.includes(p)) continue
    const base = procs.find((b) => b.name === `${p.name}-base`)
    if (base) {
      out.push(...(flip ? [base, p] : [p, base]))
      flip = !flip
    } else out.push(p)
  }
  return [...out, ...procs.filter((p) => !out.includes(p))]
}

const fmt = (r: Rss): string => `${r.rss_mb} MB (anon ${r.anon_mb})`

await main()
process.exit(0)
