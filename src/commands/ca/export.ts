import { CorralCommand } from '../../cli/base-command.js'
import { storeFlags } from '../../cli/store-flags.js'

export interface CaExportResult { pem: string; fingerprint_sha256: string; path: string }

export default class CaExport extends CorralCommand<CaExportResult> {
  static override summary = "Print the corral proxy CA certificate (PEM) for workspaces to trust."
  static override description = 'Creates the CA in the data dir on first use, exactly as `serve` and `proxy` do. Only the certificate is printed; the private key never leaves the data dir.'
  static override examples = ['<%= config.bin %> ca export > corral-ca.pem', 'curl -x http://127.0.0.1:7071 --cacert corral-ca.pem …']
  static override flags = { 'data-dir': storeFlags['data-dir'] }

  async execute(): Promise<CaExportResult> {
    const { flags } = await this.parse(CaExport)
    // The CA file alone, not the proxy's index.ts: the index loads the whole proxy (about 1 s more).
    const [{ loadOrCreateCa, caFingerprint, caCertPath }, { resolve }] = await Promise.all([import('../../proxy/ca.js'), import('node:path')])
    const dir = resolve(flags['data-dir'])
    const ca = await loadOrCreateCa(dir)
    return { pem: ca.certPem, fingerprint_sha256: caFingerprint(ca), path: caCertPath(dir) }
  }

  protected override render(r: CaExportResult): void {
    process.stdout.write(r.pem)
  }
}
