import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { fileTable } from '../../cli/workspace-output.js'
import { workspacesApi, type SnapshotFileEntry } from '../../client/index.js'

export default class WorkspaceFiles extends ApiCommand<SnapshotFileEntry[]> {
  static override summary = "List the files in a workspace's latest snapshot (read from the archive, nothing unpacked)."
  static override examples = ['<%= config.bin %> workspace files ws_0193…']
  static override args = { id: Args.string({ required: true, description: 'Workspace id.' }) }

  async execute(): Promise<SnapshotFileEntry[]> {
    const { args } = await this.parse(WorkspaceFiles)
    return workspacesApi(this.client).files(args.id)
  }

  protected override render(rows: SnapshotFileEntry[]): void {
    process.stdout.write(rows.length ? fileTable(rows) : 'The snapshot is empty.\n')
  }
}
