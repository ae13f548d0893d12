import { once } from 'node:events'
import { createWriteStream, type WriteStream } from 'node:fs'
import * as Flags from '@oclif/core/flags'
import { ApiCommand } from '../../cli/api-command.js'
import { exportBundle, trustFlags } from '../../cli/audit-bundle.js'
import { CliError } from '../../cli/errors.js'
import * as q from '../../cli/flags.js'
import { diag } from '../../cli/output.js'
import { storeFlags } from '../../cli/store-flags.js'
import { AUDIT_ORDERS } from '../../contract/index.js'

type Bundle = Awaited<ReturnType<typeof exportBundle>>
type Lines = { events: number; out: string }

const FORMATS = ['bundle', 'jsonl', 'csv', 'ocsf'] as const

export default class AuditExport extends ApiCommand<Bundle | Lines> {
  static override summary = 'Export an org\'s audit log: the provable bundle, or the rows as JSON lines, CSV or OCSF events.'
  static override description = `--format bundle writes the provable log for offline verification (\`audit verify --dir\`): the rows as canonical JSONL in log order, the leaves, the signed checkpoints, the witness's copies and the public keys (docs/audit.md "The export bundle"); it reads the database (--org, --db / --data-dir) and --out names a directory.
--format jsonl|csv|ocsf reads the caller's org through the API (with the audit query's --filter, --from, --to, --workspace), follows every page oldest first unless --order desc, and writes as it reads, so memory stays flat however long the log is; --out names a file (default stdout). jsonl: one row per line, exactly as the API returns it. csv: a header of the spec's columns, then one row per line; a text cell starting with = + - @ (or a tab or carriage return) is written with a leading apostrophe so a spreadsheet shows it instead of running it. ocsf: one OCSF 1.3.0 event per line (docs/audit.md "OCSF mapping").`

  static override examples = [
    '<%= config.bin %> audit export --format bundle --org org_123 --out ./export --witness /mnt/witness',
    '<%= config.bin %> audit export --format ocsf --from 24h --out audit.ocsf.jsonl',
    '<%= config.bin %> audit export --format csv --filter decision=deny > denials.csv',
  ]

  static override flags = {
    ...storeFlags,
    witness: trustFlags.witness,
    format: Flags.option({ options: FORMATS, required: true, summary: 'What to write: bundle, jsonl, csv or ocsf.' })(),
    org: Flags.string({ helpValue: 'ORG_ID', summary: 'bundle: the org whose log to export (_platform for the platform scope).' }),
    out: Flags.string({ helpValue: 'DIR|FILE', summary: 'bundle: the directory to write (created); other formats: a file (created or replaced) instead of stdout.' }),
    filter: q.filter, from: q.from, to: q.to,
    order: Flags.option({ options: AUDIT_ORDERS, default: 'asc' as const, summary: 'Oldest first (asc, the default) or newest first.' })(),
    limit: q.limit,
    workspace: q.workspace,
  }

  async execute(): Promise<Bundle | Lines> {
    const { flags } = await this.parse(AuditExport)
    if (flags.format === 'bundle') return exportBundle(flags)
    const { lineFormat } = await import('../../audit/export/index.js')
    const { head, line } = lineFormat(flags.format)
    const query = { filter: flags.filter, from: flags.from, to: flags.to, order: flags.order, limit: flags.limit ?? 1000 }
    const sink = flags.out ? createWriteStream(flags.out) : process.stdout
    if (flags.out) {
      await once(sink as WriteStream, 'open').catch((err: NodeJS.ErrnoException) => {
        throw new CliError(`cannot write ${flags.out}: ${err.code ?? err.message}`)
      })
    }
    let events = 0
    await write(sink, head)
    for await (const page of this.client.auditPages(query, { workspaceId: flags.workspace })) {
      await write(sink, page.events.map(line).join(''))
      events += page.events.length
    }
    if (flags.out) await new Promise<void>((ok, fail) => (sink as WriteStream).end((err?: Error | null) => (err ? fail(err) : ok())))
    diag(`${events} event${events === 1 ? '' : 's'} exported as ${flags.format}${flags.out ? ` to ${flags.out}` : ''}`)
    return { events, out: flags.out ?? '-' }
  }

  protected override render(r: Bundle | Lines): void {
    if ('tree_size' in r) process.stdout.write(`exported ${r.tree_size} rows and ${r.checkpoints} checkpoint(s) of ${r.org_id} to ${r.dir}\n`)
  }
}

/** Writes and waits for the stream to drain when its buffer is full (a slow pipe holds the next page back). */
async function write(stream: NodeJS.WritableStream, text: string): Promise<void> {
  if (!text) return
  if (!stream.write(text)) await once(stream, 'drain')
}
