import { readFile } from 'node:fs/promises'
import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import { ApiCommand } from '../../cli/api-command.js'
import { packDetails } from '../../cli/pack-output.js'
import { packsApi, type PackRecord } from '../../client/index.js'

export default class PackEdit extends ApiCommand<PackRecord> {
  static override summary = 'Replace (or add) one file of an uploaded pack; idle workspaces of roles attaching it restart.'
  static override description = 'The new content comes from --file, or from standard input when --file is absent. The pack is rebuilt as a re-upload of the edited tree would be (an edited pack.yaml is validated again); the audit log records a content_pack_updated event of kind file_edit naming the path.'
  static override examples = [
    '<%= config.bin %> pack edit hello-pack docs/readme.md --file ./readme.md',
    'echo "# notes" | <%= config.bin %> pack edit hello-pack docs/notes.md',
  ]
  static override args = {
    pack: Args.string({ required: true, description: 'Pack name or id.' }),
    path: Args.string({ required: true, description: 'The file\'s path inside the pack.' }),
  }
  static override flags = {
    file: Flags.string({ helpValue: 'FILE', summary: 'Local file with the new content (default: standard input).' }),
  }

  async execute(): Promise<PackRecord> {
    const { args, flags } = await this.parse(PackEdit)
    const content = flags.file !== undefined
      ? await readFile(flags.file).catch((err: NodeJS.ErrnoException) => { throw new Error(`cannot read --file ${flags.file}: ${err.code ?? err.message}`) })
      : await readStdin()
    const api = packsApi(this.client)
    const current = await api.resolvePack(args.pack)
    return api.editPackFile(current.id, args.path, content)
  }

  protected override render(p: PackRecord): void {
    process.stdout.write(`Pack ${p.name} ${p.version} edited.\n${packDetails(p)}`)
  }
}

async function readStdin(): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}
