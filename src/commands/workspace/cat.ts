import { Args } from '@oclif/core'
import * as Flags from '@oclif/core/flags'
import { pipeline } from 'node:stream/promises'
import { ApiCommand } from '../../cli/api-command.js'
import { CliError } from '../../cli/errors.js'
import { snapshotContent } from '../../client/index.js'

export default class WorkspaceCat extends ApiCommand<void> {
  static override summary = "Print one file of a workspace's latest snapshot (or of the one after N tasks) to stdout."
  static override description = 'The bytes as the agent left them, read from the snapshot archive on the server (nothing is unpacked). A directory, a symbolic link, a path outside /data or a missing file is one error line and exit 1; `workspace download` fetches a directory as a tar. Paths are as `workspace files` lists them.'
  static override examples = ['<%= config.bin %> workspace cat ws_0193… report.md', '<%= config.bin %> workspace cat ws_0193… out/data.json --snapshot 2 | jq .']
  static override args = {
    id: Args.string({ required: true, description: 'Workspace id.' }),
    path: Args.string({ required: true, description: 'File path relative to /data.' }),
  }
  static override flags = {
    snapshot: Flags.integer({ min: 0, helpValue: 'N', summary: 'The snapshot taken after N completed tasks (default: the latest).' }),
  }
  static override enableJsonFlag = false

  async execute(): Promise<void> {
    const { args, flags } = await this.parse(WorkspaceCat)
    const stop = new AbortController()
    const answer = await snapshotContent(this.client, args.id, { path: args.path, ...(flags.snapshot === undefined ? {} : { snapshot: flags.snapshot }), signal: stop.signal })
    if (answer.type !== 'file') {
      stop.abort()
      answer.body.destroy()
      throw new CliError(`${args.path} is a directory in the snapshot; fetch it as a tar with \`corral workspace download ${args.id} ${args.path}\``, 'is_a_directory')
    }
    // A closed pipe (`| head`) ends the copy quietly, as cat does.
    process.stdout.on('error', () => {})
    await pipeline(answer.body, process.stdout, { end: false }).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE' && err.code !== 'ERR_STREAM_PREMATURE_CLOSE') throw err
    })
  }

  protected override render(): void {}
}
