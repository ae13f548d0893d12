import * as Flags from '@oclif/core/flags'
import { ApiCommand } from '../../cli/api-command.js'
import { statsColumns } from '../../cli/audit-render.js'
import * as q from '../../cli/flags.js'
import { table } from '../../cli/output.js'
import { TIME_BUCKETS, type StatsResult } from '../../client/index.js'

export default class AuditStats extends ApiCommand<StatsResult> {
  static override summary = 'Aggregate the audit log: counts, sums and averages by dimension and time.'
  static override description = 'Dimensions, metric paths and their limits are listed in docs/api.md (GET /v1/audit/stats).'
  static override examples = [
    '<%= config.bin %> audit stats --group-by decision,reason --from 24h',
    '<%= config.bin %> audit stats --time-bucket 1h --metric sum:debits.tokens --filter event_type=policy_decision',
    '<%= config.bin %> audit stats --group-by destination --top 5:destination --json',
  ]

  static override flags = {
    'group-by': Flags.string({ helpValue: 'DIM,DIM', summary: 'Comma-separated categorical dimensions.' }),
    'time-bucket': Flags.option({ options: TIME_BUCKETS, summary: 'Add a time-series dimension.' })(),
    'bucket-by': Flags.string({ helpValue: 'COL:B1,B2', summary: 'Numeric range buckets on one column, e.g. latency_ms:10,100,1000.' }),
    metric: Flags.string({ helpValue: 'METRIC', summary: 'count (default), sum:<path> or avg:<path>, e.g. sum:debits.tokens.' }),
    top: Flags.string({ helpValue: 'N:DIM', summary: 'Keep only the top N values of one dimension.' }),
    filter: q.filter,
    from: q.from,
    to: q.to,
    workspace: q.workspace,
  }

  async execute(): Promise<StatsResult> {
    const { flags } = await this.parse(AuditStats)
    return this.client.auditStats(
      {
        group_by: flags['group-by'],
        time_bucket: flags['time-bucket'],
        bucket_by: flags['bucket-by'],
        metric: flags.metric,
        top: flags.top,
        filter: flags.filter,
        from: flags.from,
        to: flags.to,
      },
      { workspaceId: flags.workspace },
    )
  }

  protected override render(result: StatsResult): void {
    process.stdout.write(table(result.buckets, statsColumns(result.buckets)))
  }
}
