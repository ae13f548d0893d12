// Attack catalogue, serve's own listeners (issue 15 class 2): whatever the policy says — loopback
// named, `allow_private: ["0.0.0.0/0", "::/0"]` — a workspace cannot reach the real `serve`'s API
// or proxy port through the proxy. Against the real binary: the listener list is wired in serve.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AddressGuard } from '../../src/net/index.js'
import { databaseEndpoint, endpointOf } from '../../src/serve/index.js'
import { openStore } from '../../src/store/index.js'
import { proxyTables } from '../../src/store/proxy-tables.js'
import { runCorral, startServe, type RunningServe } from '../helpers/serve.js'
import { plainRequest } from './raw.js'

describe("serve's own listeners through the real serve", () => {
  let serve: RunningServe
  let other: Server
  let otherPort = 0
  let token = ''
  let apiPort = 0
  let proxyPort = 0

  beforeAll(async () => {
    other = createServer((_req, res) => res.end('a loopback service the policy names'))
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', r))
    otherPort = (other.address() as AddressInfo).port
    serve = await startServe()
    apiPort = Number(new URL(serve.url).port)
    proxyPort = Number(new URL(/proxy (http:\/\/[^\s,)]+)/.exec(serve.output())![1]!).port)
    const caps = `
- name: everything-local
  type: http
  allow:
    - domains: ["127.0.0.1:${apiPort}", "localhost:${apiPort}", "127.0.0.1:${proxyPort}", "127.0.0.1:${otherPort}"]
      methods: [GET]
      allow_insecure: true
      allow_private: ["0.0.0.0/0", "::/0"]
`
    const store = await openStore(`sqlite:${join(serve.dataDir, 'corral.db')}`)
    let workspaceId: string
    try {
      const org = (await store.orgs.getByName('default'))!
      const t = proxyTables(store.db)
      const prov = await t.workspaces.createProvider(org.id, { name: 'anthropic' })
      const role = await t.workspaces.createRole(org.id, { name: 'local', provider_id: prov, capabilities: caps })
      workspaceId = await t.workspaces.create(org.id, { role_id: role, created_by_user_id: 'usr_e2e' })
    } finally {
      await store.close()
    }
    const tok = await runCorral(['admin', 'proxy-token', '--workspace', workspaceId, '--ttl', '5m', '--data-dir', serve.dataDir, '--json'])
    token = (JSON.parse(tok.stdout) as { token: string }).token
  }, 60_000)
  afterAll(async () => {
    await serve?.stop()
    await new Promise((r) => other?.close(r))
  })

  it('the API and proxy ports are destination_private under the widest allow_private; a named loopback service is reachable', async () => {
    const ok = await plainRequest({ proxyPort, target: `http://127.0.0.1:${otherPort}/`, token })
    expect(ok.status).toBe(200)
    for (const target of [`http://127.0.0.1:${apiPort}/v1/orgs`, `http://localhost:${apiPort}/healthz`, `http://127.0.0.1:${proxyPort}/`]) {
      const res = await plainRequest({ proxyPort, target, token })
      expect(res.status, target).toBe(403)
      expect(res.headers['x-corral-deny-reason'], target).toBe('destination_private')
    }
  })
})

describe('listener endpoints', () => {
  it('the database of --db is a listener; SQLite has none', () => {
    expect(databaseEndpoint('postgres://u:p@db.internal:6543/x')).toEqual([{ host: 'db.internal', port: 6543 }])
    expect(databaseEndpoint('postgresql://127.0.0.1/x')).toEqual([{ host: '127.0.0.1', port: 5432 }])
    expect(databaseEndpoint('sqlite:/tmp/x.db')).toEqual([])
    expect(endpointOf('http://[::]:7070')).toEqual([{ host: '::', port: 7070 }])
  })

  it('a listener named by host name is refused under every address the name resolves to', async () => {
    const guard = new AddressGuard(() => [{ host: 'db.internal', port: 6543 }], async (name) =>
      name === 'db.internal' || name === 'alias.example' ? [{ address: '10.9.8.7', family: 4 }] : [])
    const allow = (await import('../../src/net/index.js')).allowList(['10.0.0.0/8'])
    await expect(guard.resolve('db.internal', 6543, allow)).rejects.toMatchObject({ own: true })
    await expect(guard.resolve('alias.example', 6543, allow)).rejects.toMatchObject({ own: true })
    await expect(guard.resolve('alias.example', 6544, allow)).resolves.toBe('10.9.8.7')
  })
})
