// The set-up of the WebSocket proxy suites: a proxy harness (test/proxy/harness.ts) with a real
// `ws` upstream on its servers (test/proxy/ws-helpers.ts), both started before the suite's tests
// and closed after them, and the decision rows counted from the start of each test.
import { join } from 'node:path'
import { afterAll, beforeAll, beforeEach } from 'vitest'
import type { AuditEvent } from '../../src/contract/index.js'
import { isStaticAuthProvider } from '../../src/policy/index.js'
import { OrgMaterialAdmin, Sealer, loadMasterKey } from '../../src/secrets/index.js'
import { startHarness, type Harness } from '../proxy/harness.js'
import { wsUpstream, type WsUpstream } from '../proxy/ws-helpers.js'

export interface WsSuite {
  /** The harness (from the suite's beforeAll on). */
  readonly h: Harness
  /** The `ws` upstream on the harness's HTTPS and HTTP servers. */
  readonly up: WsUpstream
  /** The decision rows written since the test began, once there are `n` of them. */
  newRows(n: number): Promise<AuditEvent[]>
  /** How many decision rows there were when the test began (a test moves it past rows it has read). */
  before: number
  /** A workspace on `caps` after the org's secret `api_key` is set to `secret` (what `socketsCaps` injects). */
  keyedWorkspace(caps: string, secret: string): Promise<{ workspaceId: string; token: string }>
}

/**
 * The suites' `realtime` cap: the rule `sockets` (GET upgrades of `paths` on the loopback upstream,
 * with `match` lines when given) whose requests get the org's `api_key` secret as `x-api-key`;
 * `rules` are more allow rules after it, `budgets` the cap's budgets block.
 */
export function socketsCaps(paths: string[], more: { match?: string; rules?: string; budgets?: string } = {}): string {
  return `
- name: realtime
  type: http
  allow:
    - name: sockets
      domains: ["127.0.0.1"]
      methods: [GET]
      paths: [${paths.map((p) => JSON.stringify(p)).join(', ')}]
${more.match ?? ''}${more.rules ?? ''}  transforms:
    - name: key
      applies_to: [sockets]
      header: { name: x-api-key, action: set, value: 'secrets["api_key"]' }
${more.budgets ?? ''}`
}

/** Call inside a `describe`: registers the hooks; a beforeAll registered after it sees `h` and `up`. */
export function wsSuite(options?: Parameters<typeof startHarness>[0]): WsSuite {
  let h: Harness | undefined
  let up: WsUpstream | undefined
  let before = 0
  beforeAll(async () => {
    h = await startHarness(options)
    up = wsUpstream(h)
  })
  afterAll(async () => {
    up?.close()
    await h?.close()
  })
  beforeEach(() => {
    before = h!.audit.decisions().length
  })
  return {
    get h() { return h! },
    get up() { return up! },
    newRows: async (n) => (await h!.audit.waitForDecisions(before + n)).slice(before),
    get before() { return before },
    set before(n) { before = n },
    async keyedWorkspace(caps, secret) {
      const admin = new OrgMaterialAdmin(h!.store, new Sealer(await loadMasterKey(join(h!.dir, 'data'))), h!.audit, isStaticAuthProvider)
      await admin.setSecret({ orgId: h!.orgId, userId: h!.userId }, 'api_key', secret)
      return h!.workspace(caps)
    },
  }
}
