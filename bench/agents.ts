// Agent kinds benchmark (not a test): for the reference agent and each agent CLI with an adapter in
// this build, against a real `corral serve` (dist/: `npm run build` first) with the local runtime
// and the fake model speaking every API (corral dev's script: write a file, run a command, answer):
//  - cold start to first model request: `POST /v1/tasks` (a new workspace each run) → the start of
//    the first model request the proxy decided (its decision row's timestamp less its latency)
//  - end-to-end task time: the task's created_at → finished_at
//  - the size of each CLI's mounted package (what a workspace maps read-only; nothing is copied)
// Run: `npm run bench:agents` → prints a table, writes bench/results/agents.json. BENCH_RUNS (3).
// Where corral's install lacks a CLI, CORRAL_AGENT_CLI_DIR names a node_modules folder holding it.
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { cpus, loadavg } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ADAPTERS } from '../src/agent/kinds/index.js'
import { AGENT_KIND_PROVIDERS, type AgentKind, type CliAgentKind } from '../src/contract/index.js'
import { devScript, modelPolicy } from '../src/dev/index.js'
import { agentCliDirsFromEnv, locateAgentCli } from '../src/runtime/index.js'
import { onLoopback, portOf } from '../test/helpers/loopback-caps.js'
import { startStack } from '../test/helpers/serve.js'
import { bwrapAvailable } from '../test/runtime/helpers.js'

const RUNS = Number(process.env.BENCH_RUNS ?? 3)
const RUNTIME = (await bwrapAvailable()) ? 'local' : 'process'
const pct = (xs: number[], p: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)]!

/** The API paths a kind's model calls use, for its policy and to find its model requests in the audit log. */
const PATHS = { anthropic: ['/v1/messages'], openai: ['/v1/responses', '/v1/chat/completions'], gemini: ['/v1beta/models/*'] } as const

const kinds: AgentKind[] = ['corral', ...(Object.keys(ADAPTERS) as CliAgentKind[])]
const cliDirs = agentCliDirsFromEnv()

const stack = await startStack({
  runtime: RUNTIME, model: devScript(), modelApis: ['anthropic', 'openai', 'openai-responses', 'gemini'],
  ...(cliDirs.length ? { env: { CORRAL_AGENT_CLI_DIR: cliDirs.join(':') } } : {}),
})
const port = portOf(stack.model!.url)
const results: Array<Record<string, unknown>> = []
try {
  for (const kind of kinds) {
    const api = AGENT_KIND_PROVIDERS[kind][0]
    const provider = await stack.api('POST', '/providers', {
      name: `fake-${kind}`, kind: api, base_url: api === 'openai' ? `${stack.model!.url}/v1` : stack.model!.url, default_model: 'bench-1',
    })
    const caps = onLoopback(modelPolicy({ domain: '127.0.0.1', paths: PATHS[api], identity: true }), port)
    const role = await stack.api('POST', '/agent-roles', { name: `bench-${kind}`, provider_id: provider.body.id, capabilities: caps, ...(kind === 'corral' ? {} : { agent_kind: kind }) })
    if (role.status !== 201) throw new Error(`role for ${kind}: ${JSON.stringify(role.body)}`)
    const firstRequest: number[] = []
    const endToEnd: number[] = []
    for (let i = 0; i < RUNS; i++) {
      const r = await stack.api('POST', '/tasks', { role_name: `bench-${kind}`, description: 'say hello' })
      const task = await stack.until(async () => {
        const t = (await stack.api('GET', `/tasks/${r.body.task_id}`)).body
        return ['completed', 'failed', 'cancelled'].includes(t.status) && t
      }, `bench task of ${kind}`, 300_000)
      if (task.status !== 'completed') throw new Error(`${kind}: task ${task.status}: ${task.summary}`)
      const rows = await stack.audit(r.body.workspace_id, 'event_type=policy_decision')
      const model = rows.filter((d) => !String(d.path).startsWith('/task/') && !String(d.path).startsWith('/tasks'))
      const created = Date.parse(task.created_at)
      firstRequest.push(Math.min(...model.map((d) => Date.parse(d.timestamp) - (d.latency_ms ?? 0))) - created)
      endToEnd.push(Date.parse(task.finished_at) - created)
    }
    const size = kind === 'corral' ? undefined : Number(execFileSync('du', ['-sbL', locateAgentCli(kind, cliDirs).dir], { encoding: 'utf8' }).split('\t')[0])
    results.push({
      kind, runs: RUNS, first_model_request_p50_ms: pct(firstRequest, 50), first_model_request_max_ms: Math.max(...firstRequest),
      task_p50_ms: pct(endToEnd, 50), task_max_ms: Math.max(...endToEnd), ...(size !== undefined ? { package_mb: +(size / 1e6).toFixed(0) } : {}),
    })
  }
} finally {
  await stack.close()
}

console.table(results)
const out = { runtime: RUNTIME, cpus: cpus().length, loadavg: loadavg().map((l) => +l.toFixed(2)), results }
const dir = join(fileURLToPath(new URL('.', import.meta.url)), 'results')
mkdirSync(dir, { recursive: true })
writeFileSync(join(dir, 'agents.json'), `${JSON.stringify(out, null, 2)}\n`)
console.log(`load average ${out.loadavg.join(' ')} on ${out.cpus} cores; written bench/results/agents.json`)
