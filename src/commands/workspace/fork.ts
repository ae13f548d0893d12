import { Args } from '@oclif/core'
import * as Flags from '@oclif/core/flags'
import { ApiCommand } from '../../cli/api-command.js'
import { CliError } from '../../cli/errors.js'
import { Progress } from '../../cli/progress.js'
import { workspacesApi, type WorkspaceRecord } from '../../client/index.js'

type Forked = Awaited<ReturnType<ReturnType<typeof workspacesApi>['fork']>>
type Result = Forked & { workspace?: WorkspaceRecord }

/** States a fork settles in once its /data is restored and it can take a task. */
const READY = ['idle', 'busy']

export default class WorkspaceFork extends ApiCommand<Result> {
  static override summary = 'Fork a workspace from the snapshot taken after N completed tasks (0: empty).'
  static override description = 'The new workspace belongs to you and starts provisioning; the parent is unchanged. A busy parent is refused (invalid_state). With --wait the command shows the fork\'s progress on stderr and returns once it is ready to take a task (idle), exit 1 if it failed or --timeout passed.'
  static override examples = ['<%= config.bin %> workspace fork ws_0193… --at 1', '<%= config.bin %> workspace fork ws_0193… --at 1 --wait --json']
  static override args = { id: Args.string({ required: true, description: 'Parent workspace id.' }) }
  static override flags = {
    at: Flags.integer({ min: 0, required: true, helpValue: 'N', summary: 'fork_point_task_count: tasks completed in the parent at the snapshot.' }),
    wait: Flags.boolean({ summary: 'Wait until the fork is ready (idle), showing progress on stderr.' }),
    timeout: Flags.integer({ min: 1, default: 300, helpValue: 'SECONDS', summary: 'With --wait: give up after this long (the fork goes on).' }),
  }

  async execute(): Promise<Result> {
    const { args, flags } = await this.parse(WorkspaceFork)
    const api = workspacesApi(this.client)
    const forked = await api.fork(args.id, flags.at)
    if (!flags.wait) return forked
    const progress = new Progress()
    const deadline = Date.now() + flags.timeout * 1000
    try {
      return await this.#waitReady(api, forked, flags, progress, deadline)
    } catch (error) {
      progress.clear()
      throw error
    }
  }

  async #waitReady(api: ReturnType<typeof workspacesApi>, forked: Forked, flags: { at: number; timeout: number }, progress: Progress, deadline: number): Promise<Result> {
    for (;;) {
      const ws = await api.getWorkspace(forked.workspace_id)
      if (READY.includes(ws.state)) {
        progress.done(`Fork ${ws.id} is ${ws.state}.`)
        return { ...forked, status: ws.state, workspace: ws }
      }
      if (ws.failure || ['stopped', 'stopping', 'archived'].includes(ws.state)) {
        progress.done(`Fork ${ws.id} did not become ready.`)
        throw new CliError(`fork ${ws.id} is ${ws.state}${ws.failure ? `: ${ws.failure}` : ''}`, 'fork_failed')
      }
      if (Date.now() > deadline) {
        progress.done(`Fork ${ws.id} still ${ws.state}.`)
        throw new CliError(`fork ${ws.id} still ${ws.state} after ${flags.timeout}s (it goes on; see \`corral workspace show ${ws.id}\`)`, 'timeout')
      }
      progress.update(`Forking ${forked.parent_workspace_id} at ${flags.at} → ${ws.id}: ${ws.state}, restoring the snapshot`)
      await new Promise((r) => setTimeout(r, 250))
    }
  }

  protected override render(r: Result): void {
    process.stdout.write(`Workspace ${r.workspace_id} forked from ${r.parent_workspace_id} at ${r.fork_point_task_count} tasks (${r.status})\n`)
  }
}
