// The load generator of bench:proxy's transparent mode (bench/proxy-transparent.ts). It runs as the
// "agent" of the sandbox init, in a network namespace set up by src/runtime/egress.ts, so it has
// no route anywhere: every TCP connection it opens is taken by the init's TPROXY listener and handed
// to the proxy over the bridge, and its lookups go to the init's resolver at 127.0.0.53.
// It measures, in this order:
//  - lookups: the same paced lookups against a stub answering from memory on loopback, then
//    against corral's resolver (half allowed names, which write their `dns` row, half not);
//  - CONNECT: the workload with HTTPS_PROXY (the init's bridge listener), the tool naming the host;
//  - transparent: the workload without it, the tool resolving BENCH_NAME through corral and
//    dialling the synthetic address (a closed loop, then the open loop at a fixed rate).
// The proxy's CPU (its process tree) and the relay's (the init, this process's parent) per request.
// Argument: JSON config; writes the figures as JSON to its `out`.
import dgram from 'node:dgram'
import { Resolver } from 'node:dns/promises'
import { readFileSync, writeFileSync } from 'node:fs'
import dnsPacket from 'dns-packet'
import { Agent, ProxyAgent, type Dispatcher } from 'undici'
import { SANDBOX_RESOLVER } from '../src/runtime/egress.js'
import { BENCH_NAME, closedLoop, pct, post, round } from './proxy-load.js'
import { fixedRate } from './proxy-rate.js'

export interface GeneratorConfig { out: string; caFile: string; token: string; corralPid: number; upPort: number; bridgePort: number; seconds: number; rate: number; rateSeconds: number }

const cfg = JSON.parse(process.argv[2]!) as GeneratorConfig
const ca = readFileSync(cfg.caFile, 'utf8')
const origin = `https://${BENCH_NAME}:${cfg.upPort}`
const STUB_PORT = 5300
const LOOKUP_RATE = 100 // below the resolver's 200 queries/s per workspace
const LOOKUP_SECONDS = 3

function startStub(): Promise<dgram.Socket> {
  const s = dgram.createSocket('udp4')
  s.on('message', (msg, rinfo) => {
    const q = dnsPacket.decode(msg)
    const answers = (q.questions ?? []).map((x) => ({ name: x.name, type: 'A' as const, ttl: 30, data: '127.0.0.1' }))
    s.send(dnsPacket.encode({ type: 'response', id: q.id ?? 0, flags: dnsPacket.RECURSION_DESIRED, questions: q.questions ?? [], answers }), rinfo.port, rinfo.address)
  })
  return new Promise((r) => s.bind(STUB_PORT, '127.0.0.1', () => r(s)))
}

/** LOOKUP_RATE lookups a second for LOOKUP_SECONDS, each timed from its scheduled start. */
async function lookups(server: string): Promise<Record<string, number>> {
  const r = new Resolver({ timeout: 2000, tries: 1 })
  r.setServers([server])
  const lat: number[] = []
  let errors = 0
  const n = LOOKUP_RATE * LOOKUP_SECONDS
  const start = performance.now()
  const pending: Promise<void>[] = []
  for (let i = 0; i < n; i++) {
    const at = start + (i * 1000) / LOOKUP_RATE
    const wait = at - performance.now()
    if (wait > 1) await new Promise((res) => setTimeout(res, wait))
    const name = i % 2 ? BENCH_NAME : `n${i % 16}.elsewhere.dev`
    pending.push(r.resolve4(name).then(() => void lat.push(performance.now() - at), () => void errors++))
  }
  await Promise.all(pending)
  return { p50_ms: round(pct(lat, 50), 3), p99_ms: round(pct(lat, 99), 3), errors }
}

/** The closed loop and the fixed rate through `d`, with the proxy's and the relay's CPU per request. */
async function workload(d: Dispatcher): Promise<Record<string, number | null>> {
  const loop = await closedLoop(() => post(d, origin), { seconds: cfg.seconds, pids: [cfg.corralPid], sidePids: [process.ppid] })
  const rate = await fixedRate(d, (x) => post(x, origin), { rate: cfg.rate, seconds: cfg.rateSeconds, pid: cfg.corralPid })
  return {
    closed_rps: loop.rps, closed_p50_ms: loop.p50_ms, closed_p99_ms: loop.p99_ms, cpu_ms_per_req: loop.cpu_ms_per_req,
    relay_cpu_ms_per_req: loop.side_cpu_ms_per_req ?? null,
    r500_p50_ms: rate.p50_ms, r500_p99_ms: rate.p99_ms, r500_achieved_rps: rate.achieved_rps, r500_cpu_ms_per_req: rate.cpu_ms_per_req ?? null,
    errors: loop.errors + rate.errors,
  }
}

const stub = await startStub()
const stubLookups = await lookups(`127.0.0.1:${STUB_PORT}`)
stub.close()
const corralLookups = await lookups(SANDBOX_RESOLVER)
const resolver = new Resolver()
resolver.setServers([SANDBOX_RESOLVER])
const [synthetic] = await resolver.resolve4(BENCH_NAME)

const viaProxy = new ProxyAgent({ uri: `http://127.0.0.1:${cfg.bridgePort}`, token: `Bearer ${cfg.token}`, requestTls: { ca }, connections: 32 })
const connect = await workload(viaProxy)
await viaProxy.close()

// A tool that ignores HTTPS_PROXY: it dials the address corral's resolver gave it (undici resolves
// with this lookup), SNI is the name it asked for.
type LookupCb = (err: Error | null, address: string | { address: string; family: number }[], family?: number) => void
const lookup = (_host: string, opts: { all?: boolean }, cb: LookupCb): void => (opts.all ? cb(null, [{ address: synthetic!, family: 4 }]) : cb(null, synthetic!, 4))
const direct = new Agent({ connect: { ca, lookup } as never, connections: 32 })
const transparent = await workload(direct)
await direct.close()

writeFileSync(cfg.out, JSON.stringify({
  synthetic_address: synthetic,
  lookup: { rate: LOOKUP_RATE, seconds: LOOKUP_SECONDS, stub: stubLookups, corral: corralLookups },
  connect, transparent,
}))
process.exit(0)
