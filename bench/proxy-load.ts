// The request shapes of bench:proxy and the closed loops that drive them (the open loop at a fixed
// rate is proxy-rate.ts). Same mix for every target: a JSON POST matched by a body CEL rule with two
// header transforms, an injected credential and a request counter; an SSE stream of ~2 KB in 20
// events metered by a token counter; a JSON-RPC tools/call to /mcp decided by typed CEL over its
// arguments. A target's CPU is its whole process tree's (every thread of every process, /proc).
import { readFileSync } from 'node:fs'
import { request, type Dispatcher } from 'undici'
import { procCpuMs, processTree, treeCpu } from './proxy-rate.js'

/** The upstream's name in the transparent mode (resolved by corral's resolver in the workspace, by the proxy's own hosts file). */
export const BENCH_NAME = 'upstream.corral-bench.dev'
export const CONCURRENCY = 32
export const POST_BODY = JSON.stringify({ model: 'claude-bench', max_tokens: 1024, messages: [{ role: 'user', content: 'x'.repeat(400) }] })
const MCP_BODY = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'create_issue', arguments: { project: 'web', title: 'Flaky login test on CI', priority: 3, labels: ['bug', 'ci'] } } })

export const round = (n: number, d = 2): number => Math.round(n * 10 ** d) / 10 ** d
export const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : NaN
}

/** CPU in ms of a process and its descendants, every thread. */
export const treeCpuMs = (pid: number): number => treeCpu(processTree(pid)).total

/** Resident set size in MB of a process and its descendants. */
export function treeRssMb(pid: number): number {
  let kb = 0
  for (const p of processTree(pid)) {
    try {
      kb += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))![1])
    } catch {
      // gone meanwhile
    }
  }
  return round(kb / 1024, 1)
}

export async function post(d: Dispatcher, origin: string): Promise<void> {
  const r = await request(`${origin}/v1/messages`, { dispatcher: d, method: 'POST', headers: { 'content-type': 'application/json' }, body: POST_BODY })
  await r.body.text()
  if (r.statusCode !== 200) throw new Error(`POST ${r.statusCode}`)
}

export async function stream(d: Dispatcher, origin: string, onFirst?: () => void): Promise<void> {
  const r = await request(`${origin}/v1/stream`, { dispatcher: d, method: 'GET' })
  if (r.statusCode !== 200) throw new Error(`stream ${r.statusCode}`)
  let first = true
  for await (const _ of r.body) {
    if (first) onFirst?.()
    first = false
  }
}

export async function mcpCall(d: Dispatcher, origin: string): Promise<void> {
  const r = await request(`${origin}/mcp`, { dispatcher: d, method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: MCP_BODY })
  const text = await r.body.text()
  if (r.statusCode !== 200 || !text.includes('"result"')) throw new Error(`MCP ${r.statusCode}: ${text.slice(0, 200)}`)
}

export interface LoopResult { rps: number; p50_ms: number; p99_ms: number; cpu_ms_per_req: number | null; /** `sidePids`' own CPU (without their children) per request, when given */ side_cpu_ms_per_req?: number; errors: number }

/**
 * `concurrency` senders, each starting its next request when its last one is answered, for
 * `seconds` after `warm` warm-up requests each; `pids`' CPU (process trees) per answered
 * request in the window.
 */
export async function closedLoop(send: () => Promise<void>, o: { seconds: number; concurrency?: number; pids?: number[]; sidePids?: number[]; warm?: number }): Promise<LoopResult> {
  const concurrency = o.concurrency ?? CONCURRENCY
  // Warm-up at full concurrency, so every connection the loop uses is open (and its tunnel and TLS
  // handshake made) before the window.
  await Promise.all(Array.from({ length: concurrency }, async () => {
    for (let i = 0; i < (o.warm ?? 4); i++) await send().catch(() => {})
  }))
  let errors = 0
  const lat: number[] = []
  const cpu = (pids?: number[]): number => (pids ?? []).reduce((a, p) => a + treeCpuMs(p), 0)
  const cpu0 = cpu(o.pids)
  // The side processes alone, not their children (the relay in the sandbox is this generator's parent).
  const sideCpu = (): number => (o.sidePids ?? []).reduce((a, p) => a + procCpuMs(p), 0)
  const side0 = sideCpu()
  const start = performance.now()
  const end = start + o.seconds * 1000
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (performance.now() < end) {
      const t0 = performance.now()
      await send().then(() => void lat.push(performance.now() - t0), () => void errors++)
    }
  }))
  const elapsed = (performance.now() - start) / 1000
  const used = cpu(o.pids) - cpu0
  const side = sideCpu() - side0
  return {
    rps: round(lat.length / elapsed, 1), p50_ms: round(pct(lat, 50)), p99_ms: round(pct(lat, 99)),
    cpu_ms_per_req: o.pids?.length && lat.length ? round(used / lat.length, 3) : null, errors,
    ...(o.sidePids?.length && lat.length ? { side_cpu_ms_per_req: round(side / lat.length, 3) } : {}),
  }
}

/** Median time to the first SSE event over `n` sequential streams. */
export async function firstEvent(d: Dispatcher, origin: string, n = 40): Promise<number> {
  await stream(d, origin).catch(() => {})
  const ttfe: number[] = []
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    await stream(d, origin, () => ttfe.push(performance.now() - t0)).catch(() => {})
  }
  return round(pct(ttfe, 50))
}

/** Opens `streams` held SSE streams through a proxy and reads its process tree's resident set size. */
export async function rssAtStreams(d: Dispatcher, origin: string, pid: number, streams: number): Promise<number> {
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
  for (let i = 0; i < streams; i += 100) await Promise.all(Array.from({ length: Math.min(100, streams - i) }, openOne))
  const rss = treeRssMb(pid)
  for (const ac of controllers) ac.abort()
  await d.destroy().catch(() => {})
  if (opened !== streams) throw new Error(`only ${opened} streams opened`)
  return rss
}
