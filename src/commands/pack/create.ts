import * as Flags from '@oclif/core/flags'
import { ApiCommand } from '../../cli/api-command.js'
import { PACK_VISIBILITIES } from '../../contract/index.js'
import { packDetails } from '../../cli/pack-output.js'
import { packsApi, type PackRecord } from '../../client/index.js'

export default class PackCreate extends ApiCommand<PackRecord> {
  static override summary = 'Create a pack from an OCI image in a registry (the server pulls it).'
  static override description =
    'The image holds the pack tree (pack.yaml at its root); the server pulls it, flattens its layers, checks it like an uploaded archive and records image_ref. The registry must be allowed on the server (CORRAL_REGISTRY_ALLOW, docs/packs.md "Registry"). To upload a local directory instead, use pack upload.'
  static override examples = [
    '<%= config.bin %> pack create --image-ref registry.example.com/team/web-tools:2.0.0',
    '<%= config.bin %> pack create --image-ref registry.example.com/team/web-tools@sha256:… --visibility community --json',
  ]
  static override flags = {
    'image-ref': Flags.string({ summary: 'Image reference: host[:port]/repository[:tag|@sha256:…].', required: true }),
    visibility: Flags.string({ summary: 'Who can see the pack: this org only, or every org (community).', options: [...PACK_VISIBILITIES] }),
  }

  async execute(): Promise<PackRecord> {
    const { flags } = await this.parse(PackCreate)
    return packsApi(this.client).createPack({ image_ref: flags['image-ref'], visibility: flags.visibility as 'org' | 'community' | undefined })
  }

  protected override render(p: PackRecord): void {
    process.stdout.write(`Pack ${p.name} ${p.version} created from ${p.image_ref}.\n${packDetails(p)}`)
  }
}
