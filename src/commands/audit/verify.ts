import * as Flags from '@oclif/core/flags'
import { ApiCommand } from '../../cli/api-command.js'
import { remoteLog, renderReport, trustFlags, verifyFrom } from '../../cli/audit-bundle.js'
import { storeFlags } from '../../cli/store-flags.js'
import type { VerifyReport } from '../../audit/index.js'

export default class AuditVerify extends ApiCommand<VerifyReport> {
  static override summary = 'Prove an org\'s audit log: every row against its signed checkpoints and the witness.'
  static override description = `Reads the caller's org's log through the API (GET /v1/audit/log, needs audit:read); with --org, any org's log straight from the database (--db / --data-dir, like \`corral admin\`); offline, an export directory (--dir, written by \`audit export --format bundle\`). Prints one line per finding (a row changed, removed, inserted or reordered, a truncated tail, a checkpoint the database lost) and exits 0 only when everything verifies. Trust comes from --witness and --key; without them the log's own keys are used and a note says so (docs/audit.md "How an auditor verifies").`
  static override examples = [
    '<%= config.bin %> audit verify --witness /mnt/witness',
    '<%= config.bin %> audit verify --org org_123 --db postgres://corral@db/corral --witness /mnt/witness',
    '<%= config.bin %> audit verify --dir ./export --key corral-audit-1a2b…+89abcdef+AX… --json',
  ]
  static override flags = {
    ...storeFlags,
    ...trustFlags,
    org: Flags.string({ helpValue: 'ORG_ID', summary: 'Read this org\'s log from the database instead of the API (_platform for the platform scope).' }),
    dir: Flags.string({ helpValue: 'DIR', summary: 'Verify an export directory instead of the database.' }),
  }

  async execute(): Promise<VerifyReport> {
    const { flags } = await this.parse(AuditVerify)
    const report = await verifyFrom(flags, () => remoteLog(this.client))
    if (!report.ok) process.exitCode = 1
    return report
  }

  protected override render(r: VerifyReport): void {
    process.stdout.write(renderReport(r))
  }
}
