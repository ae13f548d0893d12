import { Flags } from '@oclif/core'
import { CorralCommand } from '../cli/base-command.js'
import { CliError } from '../cli/errors.js'
import { diag } from '../cli/output.js'

interface AgentResult {
  tasks: Array<{ task_id: string; status: string; reason?: string; iterations: number }>
}

export default class AgentCommand extends CorralCommand<AgentResult> {
  static override description = 'Run the reference agent inside a workspace (started by the runtime; configured through CORRAL_* variables, see docs/agent.md)'
  static override examples = [
    'CORRAL_MODEL=claude-sonnet-4-5 corral agent --task-file tasks.json',
    'corral agent --task-file tasks.json --events -   # events as NDJSON on stdout instead of the proxy callback',
  ]
  static override flags = {
    'task-file': Flags.string({ description: 'JSON task, JSON array or NDJSON of tasks (default: $CORRAL_INBOX/tasks.json, else fetched from the control plane)', env: 'CORRAL_TASK_FILE' }),
    events: Flags.string({ description: "'-' writes events to stdout as NDJSON instead of posting them through the proxy", options: ['-'] }),
  }

  async execute(): Promise<AgentResult> {
    const { flags } = await this.parse(AgentCommand)
    // Imported here, not at module top: the agent stack (undici clients) is not needed by other commands.
    const { runAgentProcess } = await import('../agent/index.js')
    let outcomes
    try {
      outcomes = await runAgentProcess({ ...(flags['task-file'] ? { taskFile: flags['task-file'] } : {}), eventsToStdout: flags.events === '-', log: diag })
    } catch (err) {
      throw new CliError((err as Error).message, 'agent_failed')
    }
    return { tasks: outcomes.map((o) => ({ task_id: o.task_id, status: o.status, ...(o.reason ? { reason: o.reason } : {}), iterations: o.iterations })) }
  }

  protected override render(result: AgentResult): void {
    for (const t of result.tasks) diag(`task ${t.task_id}: ${t.status}${t.reason ? ` (${t.reason})` : ''} after ${t.iterations} iterations`)
  }
}
