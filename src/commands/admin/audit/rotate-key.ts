import { CorralCommand } from '../../../cli/base-command.js'
import { storeFlags } from '../../../cli/store-flags.js'

interface Rotated { key_name: string; vkey: string }

export default class AdminAuditRotateKey extends CorralCommand<Rotated> {
  static override summary = 'Replace the audit log\'s signing key in the data dir; the old public key stays published.'
  static override description = `serve signs its next checkpoint with the new key (it notices the file change); checkpoints signed before stay verifiable with the old public key, kept in the database and the witness's keys/ (docs/audit.md "Keys"). Each serve replica has its own key in its own data dir.`
  static override examples = ['<%= config.bin %> admin audit rotate-key --data-dir /var/lib/corral']
  static override flags = { 'data-dir': storeFlags['data-dir'] }

  async execute(): Promise<Rotated> {
    const { flags } = await this.parse(AdminAuditRotateKey)
    const { rotateLogKey } = await import('../../../audit/index.js')
    const k = await rotateLogKey(flags['data-dir'])
    return { key_name: k.verifier.name, vkey: k.verifier.vkey }
  }

  protected override render(r: Rotated): void {
    process.stdout.write(`${r.vkey}\n`)
  }
}
