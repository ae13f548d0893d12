import * as Flags from '@oclif/core/flags'
import { existsSync } from 'node:fs'
import { ApiCommand } from '../../cli/api-command.js'
import { CliError } from '../../cli/errors.js'
import { proxyAccessApi } from '../../client/index.js'

export interface CaExportResult { pem: string; fingerprint_sha256: string; path?: string; api_url?: string }

/** serve's default data dir (storeFlags): read only when it already holds a CA and no server is logged in. */
const DEFAULT_DATA_DIR = './.corral'

export default class CaExport extends ApiCommand<CaExportResult> {
  static override summary = "Print the corral proxy CA certificate (PEM) for workspaces to trust."
  static override description = [
    'From the API of the server you are logged in to (GET /v1/proxy/ca; the profile, or --api-url/--token), or with --data-dir from the files of a data dir where serve runs.',
    'Nothing is ever created silently: a data dir without a CA is an error (a new CA no workspace trusts would be useless) unless --create asks for one exactly as serve would make it, and with neither a login nor --data-dir the command says so. Only the certificate is printed; the private key never leaves the data dir.',
  ].join('\n\n')
  static override examples = ['<%= config.bin %> ca export > corral-ca.pem', '<%= config.bin %> ca export --data-dir /var/lib/corral > corral-ca.pem', 'curl -x http://127.0.0.1:7071 --cacert corral-ca.pem …']
  static override flags = {
    'data-dir': Flags.string({ summary: "Read the CA from this data dir (where serve runs) instead of the API.", env: 'CORRAL_DATA_DIR' }),
    create: Flags.boolean({ summary: 'With --data-dir: create the CA there when it has none (as serve does on first start).', dependsOn: ['data-dir'] }),
  }

  async execute(): Promise<CaExportResult> {
    const { flags } = await this.parse(CaExport)
    if (flags['data-dir']) return fromDataDir(flags['data-dir'], flags.create)
    const connection = this.configuredApiUrl()
    if (connection) {
      const ca = await proxyAccessApi(this.client).ca()
      return { ...ca, api_url: connection }
    }
    // Not logged in: serve's default data dir in this directory still works, as before; nothing else is guessed.
    if (existsSync(`${DEFAULT_DATA_DIR}/ca.pem`)) return fromDataDir(DEFAULT_DATA_DIR, false)
    throw new CliError('not logged in to a corral server: run `corral login` (or pass --api-url and --token), or pass --data-dir where serve runs', 'not_logged_in')
  }

  protected override render(r: CaExportResult): void {
    process.stdout.write(r.pem)
  }
}

async function fromDataDir(dataDir: string, create: boolean): Promise<CaExportResult> {
  // The CA file alone, not the proxy's index.ts: the index loads the whole proxy (about 1 s more).
  const [{ loadOrCreateCa, caFingerprint, caCertPath }, { resolve }] = await Promise.all([import('../../proxy/ca.js'), import('node:path')])
  const dir = resolve(dataDir)
  if (!create && !existsSync(caCertPath(dir))) {
    throw new CliError(`no corral CA in ${dir}: run this where serve runs or pass its --data-dir (or --create to make a new CA there)`, 'ca_not_found')
  }
  const ca = await loadOrCreateCa(dir)
  return { pem: ca.certPem, fingerprint_sha256: caFingerprint(ca), path: caCertPath(dir) }
}
