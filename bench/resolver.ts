// The DNS phase's resolver (not a test): queries per second and lookup latency of one workspace's
// resolver through the real proxy (CONNECT resolver.corral.internal:53, DNS over TCP, the way the
// sandbox's init forwards a TCP client's stream), with half the names allowed by the policy (each
// writes its `dns` row) and half not; and the resolver alone, without the proxy and its sockets.
// The audit sink is in memory: the durable audit path is bench:audit's.
//
//   node --import tsx bench/resolver.ts          # 4 streams × 5 s
//   CORRAL_BENCH_STREAMS=16 CORRAL_BENCH_SECONDS=10 node --import tsx bench/resolver.ts
import { mkdtempSync, rmSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import dnsPacket from 'dns-packet'
import type { AuditEvent, AuditSink, NewAuditEvent } from '../src/contract/index.js'
import { stamp } from '../src/audit/index.js'
import { WorkspaceResolver } from '../src/dns/index.js'
import { ProxyService } from '../src/proxy/index.js'
import { openStore } from '../src/store/index.js'
import { proxyTables } from '../src/store/proxy-tables.js'

const STREAMS = Number(process.env.CORRAL_BENCH_STREAMS ?? 4)
const SECONDS = Number(process.env.CORRAL_BENCH_SECONDS ?? 5)
const NAMES = 256
const LIMITS = { queriesPerSecond: 1e9, burst: 1e9, maxNames: 4096, ttlS: 30 }

class MemoryAudit implements AuditSink {
  rows = 0
  async emit(e: NewAuditEvent): Promise<AuditEvent> {
    this.rows++
    return stamp(e)
  }
}

const names = Array.from({ length: NAMES }, (_, i) => (i % 2 ? `n${i}.allowed.dev` : `n${i}.elsewhere.dev`))
const query = (i: number) => dnsPacket.streamEncode({ type: 'query', id: i & 0xffff, flags: dnsPacket.RECURSION_DESIRED, questions: [{ name: names[i % NAMES]!, type: 'A' }] })
const pct = (xs: number[], p: number) => Math.round(xs[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))]! * 1000) / 1000

async function stream(port: number, token: string, until: number, latencies: number[]): Promise<number> {
  const s = connect(port, '127.0.0.1')
  await new Promise<void>((r) => s.once('connect', r))
  s.write(`CONNECT resolver.corral.internal:53 HTTP/1.1\r\nhost: resolver.corral.internal:53\r\nproxy-authorization: Bearer ${token}\r\n\r\n`)
  let buf = Buffer.alloc(0)
  let head = true
  let n = 0
  let sentAt = 0
  return new Promise((resolve) => {
    const send = () => {
      if (Date.now() >= until) { s.destroy(); resolve(n); return }
      sentAt = performance.now()
      s.write(query(n))
    }
    s.on('data', (c: Buffer) => {
      buf = Buffer.concat([buf, c])
      if (head) {
        const end = buf.indexOf('\r\n\r\n')
        if (end < 0) return
        buf = buf.subarray(end + 4)
        head = false
        send()
      }
      while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        buf = buf.subarray(2 + buf.readUInt16BE(0))
        latencies.push(performance.now() - sentAt)
        n++
        send()
      }
    })
  })
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'corral-bench-resolver-'))
  const store = await openStore(`sqlite:${join(dir, 'corral.db')}`)
  const audit = new MemoryAudit()
  const proxy = new ProxyService({ store, audit, dataDir: join(dir, 'data'), port: 0, resolverLimits: LIMITS })
  try {
    const port = await proxy.start()
    const org = (await store.orgs.create({ name: 'bench' }))!
    const t = proxyTables(store.db)
    const prov = await t.workspaces.createProvider(org.id, { name: 'anthropic' })
    const caps = `- name: bench\n  type: http\n  allow:\n    - domains: ["*.allowed.dev"]\n      methods: [GET]\n`
    const role = await t.workspaces.createRole(org.id, { name: 'bench', provider_id: prov, capabilities: caps })
    const ws = await t.workspaces.create(org.id, { role_id: role, created_by_user_id: 'usr_bench' })
    const token = (await proxy.tokens.mint({ org_id: org.id, workspace_id: ws }, 3600)).token

    const latencies: number[] = []
    const until = Date.now() + SECONDS * 1000
    const counts = await Promise.all(Array.from({ length: STREAMS }, () => stream(port, token, until, latencies)))
    latencies.sort((a, b) => a - b)
    const total = counts.reduce((a, b) => a + b, 0)

    const alone = new WorkspaceResolver(LIMITS)
    const hooks = { decide: (n: string) => (n.endsWith('.allowed.dev') ? { allowed: true as const, capability: 'bench' } : { allowed: false as const }), allowed: async () => {} }
    const packets = names.map((_, i) => query(i).subarray(2))
    const aloneUntil = performance.now() + 1000
    let aloneN = 0
    while (performance.now() < aloneUntil) await alone.answer(packets[aloneN++ % NAMES]!, hooks)

    process.stdout.write(`through the proxy: ${STREAMS} streams × ${SECONDS} s: ${Math.round(total / SECONDS)} queries/s, p50 ${pct(latencies, 50)} ms, p99 ${pct(latencies, 99)} ms, dns rows ${audit.rows}\n`)
    process.stdout.write(`resolver alone: ${aloneN} queries/s\n`)
  } finally {
    await proxy.stop()
    await store.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

await main()
process.exit(0)
