import * as Flags from '@oclif/core/flags'
import { CorralCommand } from '../cli/base-command.js'
import { bwrapCheck, caCheck, type Check, databaseCheck, nodeCheck, portCheck, registryCheck } from '../cli/doctor-checks.js'
import { paint, table } from '../cli/output.js'
import { storeFlags } from '../cli/store-flags.js'

export default class Doctor extends CorralCommand<Check[]> {
  static override summary = 'Check that this machine can run `corral serve`: Node, bubblewrap, ports, database, CA, registry.'
  static override description = 'Each check is ok, warn (works with a caveat) or fail, and every one that is not ok names its fix. Nothing is created: a missing store or CA is reported (serve makes them on first start). Exit 1 when a check fails.'
  static override examples = ['<%= config.bin %> doctor', '<%= config.bin %> doctor --data-dir /var/lib/corral --db postgres://corral@db/corral --json']
  static override flags = {
    ...storeFlags,
    port: Flags.integer({ env: 'CORRAL_PORT', default: 7070, min: 1, max: 65535, summary: 'The API port serve will listen on.' }),
    'proxy-port': Flags.integer({ env: 'CORRAL_PROXY_PORT', default: 7071, min: 1, max: 65535, summary: 'The proxy port serve will listen on.' }),
  }

  async execute(): Promise<Check[]> {
    const { flags } = await this.parse(Doctor)
    const store = await import('../store/index.js')
    const checks = await Promise.all([
      Promise.resolve(nodeCheck()),
      bwrapCheck(),
      portCheck('api port', flags.port, '--port'),
      portCheck('proxy port', flags['proxy-port'], '--proxy-port'),
      databaseCheck({ dataDir: flags['data-dir'], db: flags.db, port: flags.port, proxyPort: flags['proxy-port'], env: process.env }, store),
      Promise.resolve(caCheck(flags['data-dir'])),
      registryCheck(process.env),
    ])
    if (checks.some((c) => c.status === 'fail')) process.exitCode = 1
    return checks
  }

  protected override render(checks: Check[]): void {
    const mark = { ok: paint('green', 'ok'), warn: paint('yellow', 'warn'), fail: paint('red', 'FAIL') }
    process.stdout.write(table(checks, [
      { header: 'check', get: (c) => c.check },
      { header: 'status', get: (c) => mark[c.status] },
      { header: 'detail', get: (c) => c.detail },
    ]))
    const fixes = checks.filter((c) => c.fix)
    if (fixes.length) process.stdout.write('\n' + fixes.map((c) => `${c.check}: ${c.fix}`).join('\n') + '\n')
  }
}
