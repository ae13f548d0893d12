// The agent's lean entry, what the runtime starts by default: the same agent as `corral agent`,
// without loading the CLI framework, which measurably shortens a workspace's cold start
// (bench/workspaces.ts). Configuration comes from the environment only (docs/agent.md).
import { runAgentProcess } from './index.js'

// The first date formatting loads the local time zone (ICU). Where /etc/localtime is a plain file
// rather than a link into zoneinfo (some hosts; the sandbox keeps the host's link), ICU finds the
// zone by comparing it with the zoneinfo files: 10-60 ms. Paid here, at start, so a warm agent
// does not pay it between its task's hand-over and the task's first event (docs/runtime.md
// "Benchmark").
new Date().toISOString()

try {
  const outcomes = await runAgentProcess()
  for (const o of outcomes) process.stderr.write(`task ${o.task_id}: ${o.status}${o.reason ? ` (${o.reason})` : ''} after ${o.iterations} iterations\n`)
} catch (err) {
  process.stderr.write(`corral agent: ${(err as Error).message}\n`)
  process.exitCode = 1
}
