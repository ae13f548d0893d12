import * as Args from '@oclif/core/args'
import { ApiCommand } from '../../cli/api-command.js'
import { diag } from '../../cli/output.js'
import { quietFlag, withUploadProgress } from '../../cli/progress.js'
import { archiveArg, humanBytes, packDetails } from '../../cli/pack-output.js'
import { packsApi, type PackRecord } from '../../client/index.js'

export default class PackReupload extends ApiCommand<PackRecord> {
  static override summary = 'Replace the contents of an uploaded pack; idle workspaces of roles attaching it restart.'
  static override description = 'Only packs this org owns whose origin is an upload can be re-uploaded. PATH is packed like `pack upload` does.'
  static override examples = ['<%= config.bin %> pack reupload hello-pack examples/packs/hello-pack']
  static override args = {
    pack: Args.string({ required: true, description: 'Pack name or id.' }),
    path: Args.string({ required: true, description: 'Pack directory or .tar.gz archive.' }),
  }
  static override flags = { quiet: quietFlag }

  async execute(): Promise<PackRecord> {
    const { args, flags } = await this.parse(PackReupload)
    const source = await archiveArg(args.path)
    const api = packsApi(this.client)
    const current = await api.resolvePack(args.pack)
    const shown = !this.jsonEnabled() && !flags.quiet
    if (shown && 'bytes' in source) diag(`Packed ${source.files} entries (${humanBytes(source.bytes.byteLength)} compressed); uploading…`)
    return withUploadProgress(shown, (progress) => api.reuploadPack(current.id, source, { progress }))
  }

  protected override render(p: PackRecord): void {
    process.stdout.write(`Pack ${p.name} ${p.version} re-uploaded.\n${packDetails(p)}`)
  }
}
