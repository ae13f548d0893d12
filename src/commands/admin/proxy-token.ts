import { Flags } from '@oclif/core'
import { CorralCommand } from '../../cli/base-command.js'
import { CliError, UsageError } from '../../cli/errors.js'
import { openStoreFromFlags, storeFlags } from '../../cli/store-flags.js'

export interface ProxyTokenResult { token: string; workspace_id: string; org_id: string; task_id?: string; expires_at: string }

const MAX_TTL_S = 7 * 24 * 3600

export default class AdminProxyToken extends CorralCommand<ProxyTokenResult> {
  static override summary = "Mint a capability token for a workspace, to reproduce its traffic through the proxy."
  static override description = 'Operator command with direct store access. The token is a bearer secret: whoever holds it acts as the workspace until it expires.'
  static override examples = [
    'TOKEN=$(<%= config.bin %> admin proxy-token --workspace ws_0193… --ttl 10m --json | jq -r .token)',
    'curl -x http://127.0.0.1:7071 --proxy-header "Proxy-Authorization: Bearer $TOKEN" --cacert corral-ca.pem https://api.anthropic.com/v1/models',
  ]
  static override flags = {
    ...storeFlags,
    workspace: Flags.string({ summary: 'Workspace id.', required: true }),
    task: Flags.string({ summary: 'Task id to scope the token (task budgets).' }),
    ttl: Flags.string({ summary: 'Lifetime: 30s, 10m, 2h, 1d (at most 7d).', default: '10m' }),
  }

  async execute(): Promise<ProxyTokenResult> {
    const { flags } = await this.parse(AdminProxyToken)
    const ttl = parseTtl(flags.ttl)
    // Opening the default SQLite URL would create an empty store: outside serve's data dir, say so instead.
    const { existsSync } = await import('node:fs')
    const { join, resolve } = await import('node:path')
    const dbFile = join(resolve(flags['data-dir']), 'corral.db')
    if (!flags.db && !existsSync(dbFile)) {
      throw new CliError(`no corral store at ${dbFile}: run this where serve runs, or pass its --data-dir or --db`, 'store_not_found')
    }
    const store = await openStoreFromFlags(flags)
    try {
      // The token file alone, not src/secrets/index.ts: the command needs nothing else behind that face.
      const { CapabilityTokens, loadTokenKey } = await import('../../secrets/capability-tokens.js')
      const ws = await store.proxy.workspaces.lookup(flags.workspace)
      if (!ws) throw new CliError(`no workspace ${flags.workspace}`, 'not_found')
      const tokens = new CapabilityTokens(await loadTokenKey(store.settings))
      const minted = await tokens.mint({ org_id: ws.org_id, workspace_id: ws.id, ...(flags.task ? { task_id: flags.task } : {}) }, ttl)
      return { token: minted.token, workspace_id: ws.id, org_id: ws.org_id, ...(flags.task ? { task_id: flags.task } : {}), expires_at: minted.expires_at }
    } finally {
      await store.close()
    }
  }

  protected override render(r: ProxyTokenResult): void {
    process.stdout.write(`${r.token}\n`)
  }
}

export function parseTtl(s: string): number {
  const m = /^(\d+)(s|m|h|d)$/.exec(s.trim())
  if (!m) throw new UsageError(`--ttl ${s}: expected a number and a unit (s, m, h, d), e.g. 10m`)
  const secs = Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400 }[m[2] as 's' | 'm' | 'h' | 'd']
  if (secs <= 0 || secs > MAX_TTL_S) throw new UsageError(`--ttl ${s}: must be between 1s and 7d`)
  return secs
}
