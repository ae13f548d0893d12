import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import { ApiCommand } from '../../cli/api-command.js'
import { PACK_VISIBILITIES } from '../../contract/index.js'
import { diag } from '../../cli/output.js'
import { quietFlag, withUploadProgress } from '../../cli/progress.js'
import { archiveArg, humanBytes, packDetails } from '../../cli/pack-output.js'
import { packsApi, type PackRecord } from '../../client/index.js'

export default class PackUpload extends ApiCommand<PackRecord> {
  static override summary = 'Upload a content pack: a directory with pack.yaml at its root, or a .tar.gz of one.'
  static override description =
    'A directory is packed here into a tar.gz (sorted entries, fixed mtimes, no owners; .git, .hg and .svn are left out), so the same tree always sends the same bytes. The server validates pack.yaml and the archive and builds the pack image; refusals print one line and exit 1.'
  static override examples = ['<%= config.bin %> pack upload examples/packs/hello-pack', '<%= config.bin %> pack upload build/tools.tar.gz --visibility community --json']
  static override args = { path: Args.string({ required: true, description: 'Pack directory or .tar.gz archive.' }) }
  static override flags = {
    visibility: Flags.string({ summary: 'Who can see the pack: this org only, or every org (community).', options: [...PACK_VISIBILITIES] }),
    quiet: quietFlag,
  }

  async execute(): Promise<PackRecord> {
    const { args, flags } = await this.parse(PackUpload)
    const source = await archiveArg(args.path)
    const shown = !this.jsonEnabled() && !flags.quiet
    if (shown && 'bytes' in source) diag(`Packed ${source.files} entries (${humanBytes(source.bytes.byteLength)} compressed); uploading…`)
    return withUploadProgress(shown, (progress) => packsApi(this.client).uploadPack(source, { visibility: flags.visibility as 'org' | 'community' | undefined, progress }))
  }

  protected override render(p: PackRecord): void {
    process.stdout.write(`Pack ${p.name} ${p.version} uploaded.\n${packDetails(p)}`)
  }
}
