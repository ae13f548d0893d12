import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { Progress } from '../../cli/progress.js'
import { workspacesApi, type WorkspaceRecord } from '../../client/index.js'

export default class WorkspaceStop extends ApiCommand<WorkspaceRecord> {
  static override summary = 'Stop a workspace: its running task is cancelled, /data is snapshotted, the sandbox torn down.'
  static override examples = ['<%= config.bin %> workspace stop ws_0193…']
  static override args = { id: Args.string({ required: true, description: 'Workspace id.' }) }

  async execute(): Promise<WorkspaceRecord> {
    const { args } = await this.parse(WorkspaceStop)
    // The answer comes once /data is snapshotted: say what is going on meanwhile (stderr).
    const progress = new Progress()
    const show = () => progress.update(`Stopping ${args.id}: cancelling its task, snapshotting /data`)
    show()
    const timer = setInterval(show, 500)
    try {
      const { workspace } = await workspacesApi(this.client).stop(args.id)
      progress.done(`Snapshot taken${workspace.task_count !== undefined ? ` after ${workspace.task_count} tasks` : ''}.`)
      return workspace
    } catch (error) {
      progress.clear()
      throw error
    } finally {
      clearInterval(timer)
    }
  }

  protected override render(w: WorkspaceRecord): void {
    process.stdout.write(`Workspace ${w.id} is ${w.state}\n`)
  }
}
