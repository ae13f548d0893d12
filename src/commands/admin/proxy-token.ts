import { Flags } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { CliError, UsageError } from '../../cli/errors.js'
import { proxyAccessApi } from '../../client/index.js'

export interface ProxyTokenResult { token: string; workspace_id: string; org_id: string; task_id?: string; expires_at: string }

const MAX_TTL_S = 7 * 24 * 3600

export default class AdminProxyToken extends ApiCommand<ProxyTokenResult> {
  static override summary = "Mint a capability token for a workspace, to reproduce its traffic through the proxy."
  static override description = [
    'From the API of the server you are logged in to (POST /v1/workspaces/{id}/proxy-token: unscoped workspace:write, audited as proxy_token_minted), or with --data-dir/--db directly on the store where serve runs (operator access, not audited).',
    'Nothing is created silently: a data dir without a store is an error, and with neither a login nor --data-dir the command says so. The token is a bearer secret: whoever holds it acts as the workspace until it expires.',
  ].join('\n\n')
  static override examples = [
    'TOKEN=$(<%= config.bin %> admin proxy-token --workspace ws_0193… --ttl 10m --json | jq -r .token)',
    'curl -x http://127.0.0.1:7071 --proxy-header "Proxy-Authorization: Bearer $TOKEN" --cacert corral-ca.pem https://api.anthropic.com/v1/models',
  ]
  static override flags = {
    'data-dir': Flags.string({ summary: 'Mint with the store of this data dir (where serve runs) instead of the API.', env: 'CORRAL_DATA_DIR' }),
    db: Flags.string({ summary: 'Mint with this store (sqlite:<path> or postgres://…) instead of the API.', env: 'CORRAL_DB_URL' }),
    workspace: Flags.string({ summary: 'Workspace id.', required: true }),
    task: Flags.string({ summary: 'Task id to scope the token (task budgets).' }),
    ttl: Flags.string({ summary: 'Lifetime: 30s, 10m, 2h, 1d (at most 7d).', default: '10m' }),
  }

  async execute(): Promise<ProxyTokenResult> {
    const { flags } = await this.parse(AdminProxyToken)
    const ttl = parseTtl(flags.ttl)
    if (flags['data-dir'] || flags.db) return mintFromStore(flags['data-dir'] ?? './.corral', flags.db, flags.workspace, flags.task, ttl)
    if (!this.configuredApiUrl()) {
      throw new CliError('not logged in to a corral server: run `corral login` (or pass --api-url and --token), or pass --data-dir where serve runs', 'not_logged_in')
    }
    return proxyAccessApi(this.client).mintToken(flags.workspace, { ...(flags.task ? { task_id: flags.task } : {}), ttl_seconds: ttl })
  }

  protected override render(r: ProxyTokenResult): void {
    process.stdout.write(`${r.token}\n`)
  }
}

async function mintFromStore(dataDir: string, db: string | undefined, workspaceId: string, taskId: string | undefined, ttl: number): Promise<ProxyTokenResult> {
  // Opening the default SQLite URL would create an empty store: outside serve's data dir, say so instead.
  const [{ existsSync }, { defaultStoreUrl, storeFiles }, { openStoreFromFlags }] = await Promise.all([import('node:fs'), import('../../store/index.js'), import('../../cli/store-flags.js')])
  const [dbFile] = storeFiles(defaultStoreUrl(dataDir))
  if (!db && dbFile && !existsSync(dbFile)) {
    throw new CliError(`no corral store at ${dbFile}: run this where serve runs, or pass its --data-dir or --db`, 'store_not_found')
  }
  const store = await openStoreFromFlags({ 'data-dir': dataDir, ...(db ? { db } : {}) })
  try {
    // The token file alone, not src/secrets/index.ts: the command needs nothing else behind that face.
    const { CapabilityTokens, loadTokenKey } = await import('../../secrets/capability-tokens.js')
    const ws = await store.proxy.workspaces.lookup(workspaceId)
    if (!ws) throw new CliError(`no workspace ${workspaceId}`, 'not_found')
    const tokens = new CapabilityTokens(await loadTokenKey(store.settings))
    const minted = await tokens.mint({ org_id: ws.org_id, workspace_id: ws.id, ...(taskId ? { task_id: taskId } : {}) }, ttl)
    return { token: minted.token, workspace_id: ws.id, org_id: ws.org_id, ...(taskId ? { task_id: taskId } : {}), expires_at: minted.expires_at }
  } finally {
    await store.close()
  }
}

export function parseTtl(s: string): number {
  const m = /^(\d+)(s|m|h|d)$/.exec(s.trim())
  if (!m) throw new UsageError(`--ttl ${s}: expected a number and a unit (s, m, h, d), e.g. 10m`)
  const secs = Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400 }[m[2] as 's' | 'm' | 'h' | 'd']
  if (secs <= 0 || secs > MAX_TTL_S) throw new UsageError(`--ttl ${s}: must be between 1s and 7d`)
  return secs
}
