import * as Flags from '@oclif/core/flags'
import { ApiCommand } from '../../cli/api-command.js'
import { diag, paint } from '../../cli/output.js'
import { PERMISSION_SETS, type CreatedApiKey } from '../../client/index.js'

export default class KeysCreate extends ApiCommand<CreatedApiKey> {
  static override summary = 'Create an API key; its secret is printed once.'
  static override examples = [
    '<%= config.bin %> keys create --label ci-pipeline --permission-set submit_observe',
    'CORRAL_TOKEN=$(<%= config.bin %> keys create --label bot --permission-set read_only --json | jq -r .value)',
  ]

  static override flags = {
    label: Flags.string({ required: true, summary: 'Human-readable name (at most 100 characters).' }),
    'permission-set': Flags.option({ options: PERMISSION_SETS, required: true, summary: 'Permission template of the key.' })(),
  }

  async execute(): Promise<CreatedApiKey> {
    const { flags } = await this.parse(KeysCreate)
    const key = await this.client.createApiKey({ label: flags.label, permission_set: flags['permission-set'] })
    // The secret is data (stdout); the warning is a diagnostic (stderr), also under --json.
    diag(paint('yellow', `Store this key now: its secret (${key.prefix}) will not be shown again.`, process.stderr))
    return key
  }

  protected override render(key: CreatedApiKey): void {
    process.stdout.write(`${key.value}\n`)
    diag(`Created ${key.id} "${key.label}" (${key.permission_set}).`)
  }
}
