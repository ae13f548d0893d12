import { Args } from '@oclif/core'
import * as Flags from '@oclif/core/flags'
import { pipeline } from 'node:stream/promises'
import { ApiCommand } from '../../cli/api-command.js'
import { CliError } from '../../cli/errors.js'
import { snapshotContent } from '../../client/index.js'

/** Largest file `--json` carries (the object is built in memory); plain output streams any size. */
const JSON_MAX_BYTES = 16 * 1024 * 1024

export interface CatJson {
  workspace_id: string
  path: string
  snapshot: number | null
  size: number
  /** `utf8` when the bytes are valid UTF-8, else `base64`. */
  encoding: 'utf8' | 'base64'
  content: string
}

export default class WorkspaceCat extends ApiCommand<CatJson | undefined> {
  static override summary = "Print one file of a workspace's latest snapshot (or of the one after N tasks) to stdout."
  static override description = 'The bytes as the agent left them, read from the snapshot archive on the server (nothing is unpacked). A directory, a symbolic link, a path outside /data or a missing file is one error line and exit 1; `workspace download` fetches a directory as a tar. Paths are as `workspace files` lists them. With --json: one object {workspace_id, path, snapshot, size, encoding, content}, the content as UTF-8 text when it is valid UTF-8, else base64 (files up to 16 MiB).'
  static override examples = ['<%= config.bin %> workspace cat ws_0193… report.md', '<%= config.bin %> workspace cat ws_0193… out/data.json --snapshot 2 | jq .', '<%= config.bin %> workspace cat ws_0193… out/chart.png --json | jq -r .encoding']
  static override args = {
    id: Args.string({ required: true, description: 'Workspace id.' }),
    path: Args.string({ required: true, description: 'File path relative to /data.' }),
  }
  static override flags = {
    snapshot: Flags.integer({ min: 0, helpValue: 'N', summary: 'The snapshot taken after N completed tasks (default: the latest).' }),
  }

  async execute(): Promise<CatJson | undefined> {
    const { args, flags } = await this.parse(WorkspaceCat)
    const stop = new AbortController()
    const answer = await snapshotContent(this.client, args.id, { path: args.path, ...(flags.snapshot === undefined ? {} : { snapshot: flags.snapshot }), signal: stop.signal })
    if (answer.type !== 'file' || (this.jsonEnabled() && answer.size > JSON_MAX_BYTES)) {
      stop.abort()
      answer.body.destroy()
      if (answer.type === 'file') throw new CliError(`${args.path} is ${answer.size} bytes, over the ${JSON_MAX_BYTES} bytes --json carries; print it without --json`, 'too_large')
      throw new CliError(`${args.path} is a directory in the snapshot; fetch it as a tar with \`corral workspace download ${args.id} ${args.path}\``, 'is_a_directory')
    }
    if (this.jsonEnabled()) {
      const chunks: Buffer[] = []
      for await (const chunk of answer.body) chunks.push(chunk as Buffer)
      const bytes = Buffer.concat(chunks)
      const text = utf8(bytes)
      return {
        workspace_id: args.id, path: args.path, snapshot: flags.snapshot ?? null, size: bytes.length,
        encoding: text === undefined ? 'base64' : 'utf8', content: text ?? bytes.toString('base64'),
      }
    }
    // A closed pipe (`| head`) ends the copy quietly, as cat does.
    process.stdout.on('error', () => {})
    await pipeline(answer.body, process.stdout, { end: false }).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE' && err.code !== 'ERR_STREAM_PREMATURE_CLOSE') throw err
    })
    return undefined
  }

  protected override render(): void {}
}

/** The bytes as text when they are valid UTF-8 (a lossy decode would not be the file). */
function utf8(bytes: Buffer): string | undefined {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes)
  } catch {
    return undefined
  }
}
