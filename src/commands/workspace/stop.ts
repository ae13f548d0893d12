import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { workspacesApi, type WorkspaceRecord } from '../../client/index.js'

export default class WorkspaceStop extends ApiCommand<WorkspaceRecord> {
  static override summary = 'Stop a workspace: its running task is cancelled, /data is snapshotted, the sandbox torn down.'
  static override examples = ['<%= config.bin %> workspace stop ws_0193…']
  static override args = { id: Args.string({ required: true, description: 'Workspace id.' }) }

  async execute(): Promise<WorkspaceRecord> {
    const { args } = await this.parse(WorkspaceStop)
    return (await workspacesApi(this.client).stop(args.id)).workspace
  }

  protected override render(w: WorkspaceRecord): void {
    process.stdout.write(`Workspace ${w.id} is ${w.state}\n`)
  }
}
