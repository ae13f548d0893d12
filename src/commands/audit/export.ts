import * as Flags from '@oclif/core/flags'
import { CorralCommand } from '../../cli/base-command.js'
import { exportBundle, trustFlags } from '../../cli/audit-bundle.js'
import { storeFlags } from '../../cli/store-flags.js'

type Exported = Awaited<ReturnType<typeof exportBundle>>

export default class AuditExport extends CorralCommand<Exported> {
  static override summary = 'Export an org\'s audit log.'
  static override description = `--format bundle writes the provable log for offline verification (\`audit verify --dir\`): the rows as canonical JSONL in log order, the leaves, the signed checkpoints, the witness's copies and the public keys (docs/audit.md "The export bundle").`
  static override examples = ['<%= config.bin %> audit export --format bundle --org org_123 --out ./export --witness /mnt/witness']
  static override flags = {
    ...storeFlags,
    witness: trustFlags.witness,
    format: Flags.option({ options: ['bundle'] as const, required: true, summary: 'What to write.' })(),
    org: Flags.string({ helpValue: 'ORG_ID', summary: 'The org whose log to export (_platform for the platform scope).' }),
    out: Flags.string({ helpValue: 'DIR', summary: 'The directory to write (created).' }),
  }

  async execute(): Promise<Exported> {
    const { flags } = await this.parse(AuditExport)
    return exportBundle(flags)
  }

  protected override render(r: Exported): void {
    process.stdout.write(`exported ${r.tree_size} rows and ${r.checkpoints} checkpoint(s) of ${r.org_id} to ${r.dir}\n`)
  }
}
