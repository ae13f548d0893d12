// The audit row of one proxied request, on its own: the terminal phase builds it (decisionRow) and
// the audit writer checks, stamps and encodes it into its journal line (encodeEvent), both on the
// proxy's event loop. CPU µs per row of each build given, alternating builds round by round
// (each build's dist/, so build them first), for A/B figures that do not depend on the machine's load.
//
//   node --import tsx bench/decision-row.ts [checkout …]     # default: this checkout and $CORRAL_BENCH_BASELINE
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'

const roots = (process.argv.slice(2).length ? process.argv.slice(2) : [resolve(import.meta.dirname, '..'), ...(process.env.CORRAL_BENCH_BASELINE ? [process.env.CORRAL_BENCH_BASELINE] : [])]).map((r) => resolve(r))
const ROWS = Number(process.env.CORRAL_BENCH_ROWS ?? 200_000)
const ROUNDS = Number(process.env.CORRAL_BENCH_ROUNDS ?? 6)

interface Build { root: string; row: (ctx: unknown) => unknown; encode: (row: unknown) => { ok: boolean }; ctx: () => unknown }

async function load(root: string): Promise<Build> {
  const at = (p: string): string => pathToFileURL(resolve(root, 'dist', p)).href
  const { decisionRow } = await import(at('proxy/phases/terminal.js')) as { decisionRow: Build['row'] }
  const { encodeEvent } = await import(at('audit/encode.js')) as { encodeEvent: Build['encode'] }
  const { DecisionContext } = await import(at('proxy/decision.js')) as { DecisionContext: new (o: object) => Record<string, unknown> & { authUsed: string[] } }
  // The rate bench's allow: a workspace, a matched rule, two transforms, an injected credential, a counter's debit.
  const ctx = (): unknown => {
    const c = new DecisionContext({ destination: 'api.example.test', method: 'POST', path: '/v1/messages' })
    c.attribution = { org_id: '0192f3a4-1111-7000-8000-000000000001', user_id: '0192f3a4-1111-7000-8000-000000000002', workspace_id: '0192f3a4-1111-7000-8000-000000000003', agent_role: 'coder', agent_provider: 'claude' }
    Object.assign(c, { phase: 'response_body', transformsApplied: 2, validationsApplied: 1, capability: 'model-api', debits: { requests: 1 }, budgetState: { requests: { workspace: { used: 10, max: 100_000, remaining: 99_990 } } }, upstreamStatus: 200, responseComplete: true, match: { ruleKey: 'messages' } })
    c.authUsed.push('anthropic-key')
    return c
  }
  return { root, row: decisionRow, encode: encodeEvent, ctx }
}

function measure(b: Build, what: 'row' | 'row+encode'): number {
  const ctxs = Array.from({ length: 1000 }, b.ctx)
  let ok = 0
  const t0 = process.cpuUsage()
  for (let i = 0; i < ROWS; i++) {
    const row = b.row(ctxs[i % 1000])
    if (what === 'row' || b.encode(row).ok) ok++
  }
  const t = process.cpuUsage(t0)
  if (ok !== ROWS) throw new Error(`${b.root}: ${ROWS - ok} rows did not encode`)
  return (t.user + t.system) / ROWS
}

const builds = await Promise.all(roots.map(load))
const sums = new Map<string, number[]>()
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 ? [...builds].reverse() : builds
  for (const b of order) {
    for (const what of ['row', 'row+encode'] as const) {
      const us = measure(b, what)
      // The first two rounds warm the JIT up; they are not counted.
      if (round >= 2) sums.set(`${b.root} ${what}`, [...(sums.get(`${b.root} ${what}`) ?? []), us])
    }
  }
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
for (const [k, xs] of sums) process.stdout.write(`${k}: ${median(xs).toFixed(2)} µs per row (median of ${xs.length}; ${xs.map((x) => x.toFixed(2)).join(' ')})\n`)
