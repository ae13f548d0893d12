// The proxy inside a real `corral serve`: secrets and credentials through the CLI and the /v1 API,
// `ca export`, `admin proxy-token`, then `curl -x` through the serve's proxy to an HTTPS upstream
// with its own CA (trusted via CORRAL_UPSTREAM_CA), and the one policy_decision row read back
// through the audit API (the real batched writer).
import { execFile } from 'node:child_process'
import { createServer, type Server } from 'node:https'
import { writeFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { AuditEvent } from '../../src/contract/index.js'
import { openStore } from '../../src/store/index.js'
import { proxyTables } from '../../src/store/proxy-tables.js'
import { runCorral, startStack, type Stack } from '../helpers/serve.js'
import { onLoopback } from '../helpers/loopback-caps.js'

const run = promisify(execFile)

const CAPS = `
- name: gh
  type: http
  allow:
    - domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/repos/*"]
  transforms:
    - name: key
      header: { name: x-api-key, action: set, value: 'secrets["api_key"]' }
    - name: auth
      auth: { credential: github-bot, provider: github }
`

describe('proxy in corral serve (e2e)', () => {
  let upstream: Server
  let upstreamPort: number
  /** What the upstream really got; the echo the agent receives is scrubbed. */
  let received: Record<string, string> = {}
  let stack: Stack
  const env = (): Record<string, string> => stack.cliEnv

  beforeAll(async () => {
    stack = await startStack({ upstreamCa: true })
    if (!stack.proxyUrl) throw new Error(`no proxy address in the ready line:\n${stack.serve.output()}`)
    upstream = createServer(await stack.upstreamTls('127.0.0.1'), (req, res) => {
      received = req.headers as Record<string, string>
      res.end(JSON.stringify({ url: req.url, headers: req.headers }))
    })
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r))
    upstreamPort = (upstream.address() as AddressInfo).port
  })
  afterAll(async () => {
    upstream?.closeAllConnections()
    await new Promise((r) => upstream?.close(r))
    await stack?.close()
  })

  it('secret and credential commands store values the API never returns', async () => {
    const set = await runCorral(['secret', 'set', 'api_key', '--value-stdin', '--json'], { env: env(), input: 'sk-e2e-secret\n' })
    expect(set.code, set.stderr).toBe(0)
    expect(JSON.parse(set.stdout)).toMatchObject({ name: 'api_key' })
    const cred = await runCorral(['credential', 'create', 'github-bot', '--provider', 'github', '--kind', 'static_token', '--secret-stdin', '--json'], { env: env(), input: 'ghp_e2e_token' })
    expect(cred.code, cred.stderr).toBe(0)
    const list = await runCorral(['credential', 'list', '--json'], { env: env() })
    expect(JSON.parse(list.stdout)).toEqual([expect.objectContaining({ name: 'github-bot', provider: 'github', kind: 'static_token', status: 'active' })])
    const secrets = await runCorral(['secret', 'list', '--json'], { env: env() })
    expect(secrets.stdout).not.toContain('sk-e2e')
    expect(list.stdout).not.toContain('ghp_')
    const bad = await runCorral(['credential', 'create', 'x', '--provider', 'nope', '--kind', 'static_token', '--secret', 't'], { env: env() })
    expect(bad.code).toBe(1)
    expect(bad.stderr).toMatch(/validation_error/)
  })

  it('curl through the serve proxy with an operator token: credentials injected, one audit row', async () => {
    const store = await openStore(`sqlite:${join(stack.serve.dataDir, 'corral.db')}`)
    let workspaceId: string
    try {
      const org = (await store.orgs.getByName('default'))!
      const t = proxyTables(store.db)
      const prov = await t.workspaces.createProvider(org.id, { name: 'github' })
      const role = await t.workspaces.createRole(org.id, { name: 'coder', provider_id: prov, capabilities: onLoopback(CAPS, upstreamPort) })
      workspaceId = await t.workspaces.create(org.id, { role_id: role, created_by_user_id: 'usr_e2e' })
    } finally {
      await store.close()
    }
    const tok = await runCorral(['admin', 'proxy-token', '--workspace', workspaceId, '--ttl', '5m', '--data-dir', stack.serve.dataDir, '--json'])
    expect(tok.code, tok.stderr + tok.stdout).toBe(0)
    const { token } = JSON.parse(tok.stdout) as { token: string }
    const caOut = await runCorral(['ca', 'export', '--data-dir', stack.serve.dataDir])
    expect(caOut.stdout).toMatch(/^-----BEGIN CERTIFICATE-----/)
    expect(caOut.stdout).not.toMatch(/PRIVATE/)
    writeFileSync(join(stack.dir, 'corral-ca.pem'), caOut.stdout)

    const { stdout } = await run('curl', ['-sS', '-x', stack.proxyUrl, '--proxy-header', `Proxy-Authorization: Bearer ${token}`, '--cacert', join(stack.dir, 'corral-ca.pem'), `https://127.0.0.1:${upstreamPort}/repos/x`])
    expect(received.authorization).toBe('Bearer ghp_e2e_token')
    expect(received['x-api-key']).toBe('sk-e2e-secret')
    const echo = JSON.parse(stdout) as { headers: Record<string, string> }
    expect(echo.headers.authorization).toBe('********') // one fixed-width mask, whatever the length
    expect(stdout).not.toMatch(/ghp_|sk-e2e/)

    let rows: AuditEvent[] = []
    for (let i = 0; i < 100 && rows.length === 0; i++) {
      const res = await fetch(`${stack.serve.url}/v1/audit?filter=event_type=policy_decision`, { headers: { authorization: `Bearer ${stack.serve.adminKey}` } })
      rows = ((await res.json()) as { events: AuditEvent[] }).events
      if (!rows.length) await new Promise((r) => setTimeout(r, 50))
    }
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ decision: 'allow', workspace_id: workspaceId, user_id: 'usr_e2e', capability_name: 'gh', auth_used: ['github-bot'], transforms_applied: 2, agent_role: 'coder', agent_provider: 'github' })
    expect(JSON.stringify(rows)).not.toMatch(/ghp_|sk-e2e|Bearer ey/)
    expect((rows[0]!.detail as { scrubbed?: number }).scrubbed).toBeGreaterThanOrEqual(2)
    const types = await fetch(`${stack.serve.url}/v1/audit?filter=event_type=secret_created,credential_created,workspace_activated`, { headers: { authorization: `Bearer ${stack.serve.adminKey}` } })
    const evs = ((await types.json()) as { events: AuditEvent[] }).events.map((e) => e.event_type).sort()
    expect(evs).toEqual(['credential_created', 'secret_created', 'workspace_activated'])
  })
})
