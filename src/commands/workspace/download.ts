import { Args } from '@oclif/core'
import * as Flags from '@oclif/core/flags'
import { randomUUID } from 'node:crypto'
import { createWriteStream } from 'node:fs'
import { rename, rm, stat } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { ApiCommand } from '../../cli/api-command.js'
import { CliError } from '../../cli/errors.js'
import { ByteProgress, quietFlag } from '../../cli/progress.js'
import { snapshotContent } from '../../client/index.js'

export interface DownloadResult {
  workspace_id: string
  path: string
  type: 'file' | 'directory' | 'snapshot'
  file: string
  bytes: number
}

export default class WorkspaceDownload extends ApiCommand<DownloadResult> {
  static override summary = "Save a file, a directory (as a tar) or all of /data (as a tar) from a workspace's latest snapshot."
  static override description = [
    'PATH is relative to /data, as `workspace files` lists it; without PATH the whole snapshot is saved as one tar. A directory comes as an uncompressed tar of its entries as the snapshot holds them (paths relative to /data). Nothing is unpacked, here or on the server.',
    'The file is written next to its final name and renamed into place once complete: an interrupted download leaves nothing behind, and an existing file is replaced only with --force. Progress (bytes) goes to stderr unless --json or --quiet.',
  ].join('\n\n')
  static override examples = [
    '<%= config.bin %> workspace download ws_0193… report.md -o report.md',
    '<%= config.bin %> workspace download ws_0193… out -o out.tar && tar -xf out.tar',
    '<%= config.bin %> workspace download ws_0193… -o data.tar --snapshot 1',
  ]
  static override args = {
    id: Args.string({ required: true, description: 'Workspace id.' }),
    path: Args.string({ description: 'File or directory relative to /data (default: everything).' }),
  }
  static override flags = {
    output: Flags.string({ char: 'o', helpValue: 'FILE', summary: 'Where to save it (default: the file\'s name, or NAME.tar for a directory, in the current directory).' }),
    snapshot: Flags.integer({ min: 0, helpValue: 'N', summary: 'The snapshot taken after N completed tasks (default: the latest).' }),
    force: Flags.boolean({ summary: 'Replace FILE if it exists.' }),
    quiet: quietFlag,
  }

  async execute(): Promise<DownloadResult> {
    const { args, flags } = await this.parse(WorkspaceDownload)
    const answer = await snapshotContent(this.client, args.id, { ...(args.path ? { path: args.path } : {}), ...(flags.snapshot === undefined ? {} : { snapshot: flags.snapshot }) })
    const name = args.path ? basename(args.path.replace(/\/+$/, '')) || args.id : args.id
    const file = resolve(flags.output ?? (answer.type === 'file' ? name : `${name}.tar`))
    if (!flags.force && (await stat(file).then(() => true, () => false))) {
      answer.body.destroy()
      throw new CliError(`${file} exists; pass --force to replace it or -o another file`, 'file_exists')
    }
    const partial = join(dirname(file), `.${basename(file)}.${randomUUID().slice(0, 8)}.partial`)
    const progress = new ByteProgress(`Downloading ${args.path ?? '/data'}`, answer.size, { enabled: !this.jsonEnabled() && !flags.quiet })
    try {
      await pipeline(answer.body, progress.counter(), createWriteStream(partial, { flags: 'wx', mode: 0o644 }))
      await rename(partial, file)
    } catch (error) {
      progress.clear()
      await rm(partial, { force: true })
      throw error
    }
    const bytes = (await stat(file)).size
    progress.done(`Saved ${answer.type === 'file' ? 'the file' : 'a tar of it'} to ${file}.`)
    return { workspace_id: args.id, path: args.path ?? '', type: answer.type, file, bytes }
  }

  protected override render(r: DownloadResult): void {
    if (r.type !== 'file') process.stdout.write(`${r.file} (tar, ${r.bytes} bytes)\n`)
    else process.stdout.write(`${r.file} (${r.bytes} bytes)\n`)
  }
}
