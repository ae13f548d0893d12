import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import { ApiCommand } from '../../cli/api-command.js'
import { PACK_VISIBILITIES } from '../../contract/index.js'
import { UsageError } from '../../cli/errors.js'
import { packDetails } from '../../cli/pack-output.js'
import { packsApi, type PackRecord, type PackUpdate as PackChanges } from '../../client/index.js'

export default class PackUpdate extends ApiCommand<PackRecord> {
  static override summary = 'Change the metadata of a pack this org owns (contents: reupload, or --image-ref for a registry pack).'
  static override description = 'Only the flags given are sent. An empty value clears an optional field (--category "").'
  static override examples = [
    '<%= config.bin %> pack update hello-pack --visibility community',
    '<%= config.bin %> pack update hello-pack --display-name "Hello" --category examples',
    '<%= config.bin %> pack update web-tools --image-ref registry.example.com/team/web-tools:2.0.0',
  ]
  static override args = { pack: Args.string({ required: true, description: 'Pack name or id.' }) }
  static override flags = {
    'display-name': Flags.string({ summary: 'Human-friendly name.' }),
    description: Flags.string({ summary: 'Free text.' }),
    category: Flags.string({ summary: 'Catalogue category.' }),
    'suggested-packs': Flags.string({ summary: 'Comma-separated names of related packs (a display hint).' }),
    visibility: Flags.string({ summary: 'This org only, or every org (community).', options: [...PACK_VISIBILITIES] }),
    'image-ref': Flags.string({ summary: 'Registry-origin packs: pull this image (host/repo:tag or @sha256:…) and replace the content.' }),
  }

  async execute(): Promise<PackRecord> {
    const { args, flags } = await this.parse(PackUpdate)
    const orNull = (v: string | undefined) => (v === undefined ? undefined : v === '' ? null : v)
    const body: PackChanges = {
      display_name: flags['display-name'],
      description: orNull(flags.description),
      category: orNull(flags.category),
      suggested_packs: orNull(flags['suggested-packs']),
      visibility: flags.visibility as PackChanges['visibility'],
      image_ref: flags['image-ref'],
    }
    for (const k of Object.keys(body) as (keyof PackChanges)[]) if (body[k] === undefined) delete body[k]
    if (Object.keys(body).length === 0) throw new UsageError('nothing to change: give at least one field flag')
    const api = packsApi(this.client)
    const current = await api.resolvePack(args.pack)
    return api.updatePack(current.id, body)
  }

  protected override render(p: PackRecord): void {
    process.stdout.write(`Pack ${p.name} updated.\n${packDetails(p)}`)
  }
}
