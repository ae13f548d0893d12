// Replicas benchmark (not a test): two `corral serve` processes on one PostgreSQL database and one
// registry (docs/workspaces.md "Replicas and leases").
//  - takeover time after kill -9: a replica runs a task, is killed, and the time until the other
//    replica has failed the task `replica_lost` and the workspace is idle again (p50, p90 over
//    BENCH_RUNS, default 10; the lease TTL is BENCH_LEASE_TTL seconds, default 5);
//  - proxy throughput through two replicas' proxies vs one (BENCH_SECONDS per run, default 5,
//    BENCH_CLIENTS concurrent clients, default 32), to a loopback HTTPS upstream, no budgets;
//  - budget checks per second across replicas: the same load through both proxies against a
//    counter with a ceiling and max_concurrent (ledger leases and database permits).
// Needs CORRAL_BENCH_PG_URL (or CORRAL_TEST_PG_URL), docker-registry, and `npm run build` first.
// Run: `npm run bench:replicas` → prints a summary, writes bench/results/replicas.json.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { cpus, loadavg } from 'node:os'
import { join } from 'node:path'
import { ProxyAgent, fetch as undiciFetch } from 'undici'
import { CapabilityTokens, loadTokenKey } from '../src/secrets/index.js'
import { openStore } from '../src/store/index.js'
import { proxyTables } from '../src/store/proxy-tables.js'
import { startRegistry } from '../test/helpers/registry.js'
import { createTestDatabase, startServe, startStack, type RunningServe } from '../test/helpers/serve.js'
import { bwrapAvailable } from '../test/runtime/helpers.js'

const PG = process.env.CORRAL_BENCH_PG_URL ?? process.env.CORRAL_TEST_PG_URL
const RUNS = Number(process.env.BENCH_RUNS ?? 10)
const TTL = process.env.BENCH_LEASE_TTL ?? '5'
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 32)
const RUNTIME = (await bwrapAvailable()) ? 'local' : 'process'

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] ?? NaN
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const proxyOf = (s: RunningServe) => /proxy (http:\/\/[^\s,)]+)/.exec(s.output())![1]!

function script(body: any) {
  const last = JSON.stringify(body.messages.at(-1))
  if (last.includes('long task')) return { tools: [{ name: 'run_command', input: { command: 'sleep 300', timeout_seconds: 600 } }], usage: { input: 5, output: 3 } }
  return { text: 'Done.', tools: [{ name: 'finish', input: { summary: 'done' } }], usage: { input: 5, output: 3 } }
}

async function main(): Promise<void> {
  if (!PG) throw new Error('bench:replicas needs CORRAL_BENCH_PG_URL (or CORRAL_TEST_PG_URL)')
  const registry = await startRegistry()
  const env = { CORRAL_PACK_REGISTRY: `${registry.host}/corral`, CORRAL_MASTER_KEY: 'b2'.repeat(32) }
  const args = ['--lease-ttl', TTL]
  const stack = await startStack({
    runtime: RUNTIME, db: { postgres: PG }, model: script, env, args,
    role: { name: 'coder', capabilities: '- name: model\n  type: http\n  allow:\n    - domains: ["127.0.0.1"]\n      methods: [POST]\n      paths: [/v1/messages]\n' },
  })
  const dbUrl = /--db (\S+)/.exec(stack.serve.process.spawnargs.join(' '))![1]!
  const replicaEnv = { ...env, CORRAL_UPSTREAM_CA: join(stack.dir, 'upstream-ca.pem') }
  const key = stack.serve.adminKey
  const api = async (s: { url: string }, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${s.url}/v1${path}`, { method, headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) }, ...(body ? { body: JSON.stringify(body) } : {}) })
    return res.json() as Promise<any>
  }
  const others: RunningServe[] = []
  const replica = async () => {
    const s = await startServe({ db: dbUrl, env: replicaEnv, args: ['--runtime', RUNTIME, ...args] })
    others.push(s)
    return s
  }
  try {
    const b = await replica()
    const { times: takeover, live } = await takeovers(stack.serve, b, replica, api)
    const throughput = await proxyThroughput(dbUrl, stack.upstreamTls.bind(stack), live)
    const result = {
      date: new Date().toISOString(), machine: { cpus: cpus().length, loadavg: loadavg() }, runtime: RUNTIME,
      lease_ttl_seconds: Number(TTL), takeover_ms: { runs: takeover.length, p50: pct(takeover, 50), p90: pct(takeover, 90), all: takeover },
      ...throughput,
    }
    mkdirSync(join(import.meta.dirname, 'results'), { recursive: true })
    writeFileSync(join(import.meta.dirname, 'results', 'replicas.json'), `${JSON.stringify(result, null, 2)}\n`)
    console.log(JSON.stringify(result, null, 2))
  } finally {
    for (const s of others) await s.stop()
    await stack.close()
    await registry.stop()
  }
}

/** kill -9 of the replica running a task → the survivor failed it `replica_lost` and the workspace is idle. */
async function takeovers(first: RunningServe, second: RunningServe, replica: () => Promise<RunningServe>, api: (s: { url: string }, m: string, p: string, b?: unknown) => Promise<any>): Promise<{ times: number[]; live: RunningServe[] }> {
  const out: number[] = []
  let [victim, survivor] = [first, second]
  for (let run = 0; run < RUNS; run++) {
    const accepted = await api(victim, 'POST', '/tasks', { role_name: 'coder', description: 'long task' })
    for (let i = 0; i < 600 && (await api(survivor, 'GET', `/tasks/${accepted.task_id}`)).status !== 'running'; i++) await sleep(50)
    const t0 = performance.now()
    victim.process.kill('SIGKILL')
    for (let i = 0; i < 6000; i++) {
      const t = await api(survivor, 'GET', `/tasks/${accepted.task_id}`)
      const ws = t.status === 'failed' ? await api(survivor, 'GET', `/workspaces/${accepted.workspace_id}`) : undefined
      if (ws?.state === 'idle') break
      await sleep(20)
    }
    out.push(Math.round(performance.now() - t0))
    // Leave the workspace stopped (its lease released) and bring up a new replica for the next run.
    await api(survivor, 'POST', `/workspaces/${accepted.workspace_id}/stop`)
    ;[victim, survivor] = [survivor, await replica()]
  }
  return { times: out, live: [victim, survivor] }
}

/** Requests per second through one proxy, two proxies, and two proxies with a budget counter. */
async function proxyThroughput(dbUrl: string, tlsFor: (host: string) => Promise<{ key: string; cert: string }>, replicas: RunningServe[]) {
  const live = replicas
  const upstream = createServer(await tlsFor('127.0.0.1'), (_req, res) => res.end('{"ok":true}'))
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r))
  const port = (upstream.address() as AddressInfo).port
  const caps = (budget: boolean) => `
- name: calls
  type: http
  allow:
    - domains: ["127.0.0.1:${port}"]
      allow_private: ["127.0.0.0/8"]
      methods: [GET]
${budget ? `  budgets:
    counters:
      - name: calls
        source: request.count
        max_concurrent: ${CLIENTS * 4}
        workspace: { max: 1000000000 }
` : ''}`
  const token = async (capabilities: string) => {
    const store = await openStore(dbUrl)
    try {
      const org = (await store.orgs.getByName('default'))!
      const t = proxyTables(store.db)
      const name = `bench-${Math.random().toString(36).slice(2, 8)}`
      const provider = await t.workspaces.createProvider(org.id, { name })
      const role = await t.workspaces.createRole(org.id, { name, provider_id: provider, capabilities })
      const ws = await t.workspaces.create(org.id, { role_id: role, created_by_user_id: 'usr_bench' })
      return (await new CapabilityTokens(await loadTokenKey(store.settings)).mint({ org_id: org.id, workspace_id: ws }, 3600)).token
    } finally {
      await store.close()
    }
  }
  const load = async (through: RunningServe[], tok: string): Promise<{ rps: number; non200: number; why: Record<string, number> }> => {
    const agents = through.map((s) => new ProxyAgent({ uri: proxyOf(s), token: `Bearer ${tok}`, requestTls: { ca: readFileSync(join(s.dataDir, 'ca.pem'), 'utf8') }, connections: CLIENTS }))
    let ok = 0
    let other = 0
    // What the non-200 answers were: a status with the deny reason, or the client error's code.
    const why: Record<string, number> = {}
    const note = (k: string) => void (why[k] = (why[k] ?? 0) + 1)
    const end = performance.now() + SECONDS * 1000
    await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
      for (let n = 0; performance.now() < end; n++) {
        const res = await undiciFetch(`https://127.0.0.1:${port}/c${c}/${n}`, { dispatcher: agents[c % agents.length]! }).catch((err: Error & { cause?: { code?: string } }) => {
          note(err.cause?.code ?? err.name)
          return undefined
        })
        const text = (await res?.text()) ?? ''
        if (res?.status === 200) ok++
        else {
          other++
          if (res) note(`${res.status} ${/"reason":"([a-z_]+)"/.exec(text)?.[1] ?? ''}`.trim())
        }
      }
    }))
    await Promise.all(agents.map((a) => a.close()))
    return { rps: Math.round(ok / SECONDS), non200: other, why }
  }
  try {
    const plain = await token(caps(false))
    const one = await load(live.slice(0, 1), plain)
    const two = await load(live.slice(0, 2), plain)
    const budgeted = await load(live.slice(0, 2), await token(caps(true)))
    return {
      proxy_rps: { one_replica: one, two_replicas: two, clients: CLIENTS, seconds: SECONDS },
      budget_checks_per_second_two_replicas: budgeted,
    }
  } finally {
    upstream.close()
  }
}

await main()
