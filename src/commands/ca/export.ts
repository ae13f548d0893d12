import * as Flags from '@oclif/core/flags'
import { existsSync } from 'node:fs'
import { CorralCommand } from '../../cli/base-command.js'
import { CliError } from '../../cli/errors.js'
import { storeFlags } from '../../cli/store-flags.js'

export interface CaExportResult { pem: string; fingerprint_sha256: string; path: string }

export default class CaExport extends CorralCommand<CaExportResult> {
  static override summary = "Print the corral proxy CA certificate (PEM) for workspaces to trust."
  static override description = 'Reads the CA that `serve` (or `proxy`) created in its data dir; run it where serve runs, or pass --data-dir. A data dir without a CA is an error (a new CA no workspace trusts would be useless), unless --create asks for one exactly as serve would make it. Only the certificate is printed; the private key never leaves the data dir.'
  static override examples = ['<%= config.bin %> ca export > corral-ca.pem', 'curl -x http://127.0.0.1:7071 --cacert corral-ca.pem …']
  static override flags = {
    'data-dir': storeFlags['data-dir'],
    create: Flags.boolean({ summary: 'Create the CA in the data dir when it has none (as serve does on first start).' }),
  }

  async execute(): Promise<CaExportResult> {
    const { flags } = await this.parse(CaExport)
    // The CA file alone, not the proxy's index.ts: the index loads the whole proxy (about 1 s more).
    const [{ loadOrCreateCa, caFingerprint, caCertPath }, { resolve }] = await Promise.all([import('../../proxy/ca.js'), import('node:path')])
    const dir = resolve(flags['data-dir'])
    if (!flags.create && !existsSync(caCertPath(dir))) {
      throw new CliError(`no corral CA in ${dir}: run this where serve runs or pass its --data-dir (or --create to make a new CA there)`, 'ca_not_found')
    }
    const ca = await loadOrCreateCa(dir)
    return { pem: ca.certPem, fingerprint_sha256: caFingerprint(ca), path: caCertPath(dir) }
  }

  protected override render(r: CaExportResult): void {
    process.stdout.write(r.pem)
  }
}
