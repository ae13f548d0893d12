// The agent's lean entry, what the runtime starts by default: the same agent as `corral agent`,
// without loading the CLI framework, which measurably shortens a workspace's cold start
// (bench/workspaces.ts). Configuration comes from the environment only (docs/agent.md).
import { runAgentProcess } from './index.js'

try {
  const outcomes = await runAgentProcess()
  for (const o of outcomes) process.stderr.write(`task ${o.task_id}: ${o.status}${o.reason ? ` (${o.reason})` : ''} after ${o.iterations} iterations\n`)
} catch (err) {
  process.stderr.write(`corral agent: ${(err as Error).message}\n`)
  process.exitCode = 1
}
