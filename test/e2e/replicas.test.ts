// Two `corral serve` replicas on one PostgreSQL database and one registry act as one control plane
// (issue 10 §1; docs/workspaces.md "Replicas and leases", docs/reliability.md "Replicas"): a key
// revoked on A is refused on B at once; B's org stream carries A's events; 50 parallel requests
// through both proxies never pass a `max_concurrent: 5` / `max: 20` counter; kill -9 of A mid-task
// → B takes A's workspace over (lease TTL 2 s here), the task fails `replica_lost`, /data comes
// back from the registry snapshot, a follow-up task runs on B, and its snapshot lists and forks
// from B. Local runtime (process where bubblewrap cannot run). Needs CORRAL_TEST_PG_URL and the
// registry (docker-registry).
import { appendFileSync, mkdirSync, readFileSync } from 'node:fs'
import { createServer, type Server } from 'node:https'
import type { AddressInfo } from 'node:net'
import { join, resolve } from 'node:path'
import { ProxyAgent, fetch as undiciFetch } from 'undici'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { CapabilityTokens, loadTokenKey } from '../../src/secrets/index.js'
import { openStore, replicaLeases } from '../../src/store/index.js'
import { proxyTables } from '../../src/store/proxy-tables.js'
import { describePostgres } from '../helpers/dialects.js'
import { registryAvailable, startRegistry, type TestRegistry } from '../helpers/registry.js'
import { startServe, startStack, type RunningServe, type Stack } from '../helpers/serve.js'
import { bwrapAvailable } from '../runtime/helpers.js'

const RUNTIME = (await bwrapAvailable()) ? 'local' : 'process'
const LEASE_TTL = '2'

/** The model: a long task blocks in a command (A is killed meanwhile); the others write and read a file. */
function script(body: any) {
  // A resumed session's new task message also carries the previous turn's tool results: the task's
  // words decide first.
  const last = JSON.stringify(body.messages.at(-1))
  if (last.includes('long task')) return { tools: [{ name: 'run_command', input: { command: 'sleep 120', timeout_seconds: 300 } }], usage: { input: 5, output: 3 } }
  if (last.includes('read it back')) return { tools: [{ name: 'run_command', input: { command: 'cat before.txt > after-takeover.txt' } }], usage: { input: 5, output: 3 } }
  if (last.includes('write a file')) return { tools: [{ name: 'write_file', input: { path: 'before.txt', content: 'written on A\n' } }], usage: { input: 5, output: 3 } }
  return { text: 'Done.', tools: [{ name: 'finish', input: { summary: 'done' } }], usage: { input: 5, output: 3 } }
}

const budgetCaps = (port: number) => `
- name: calls
  type: http
  allow:
    - domains: ["127.0.0.1:${port}"]
      allow_private: ["127.0.0.0/8"]
      methods: [GET]
  budgets:
    counters:
      - name: calls
        source: request.count
        max_concurrent: 5
        workspace: { max: 20 }
`

describePostgres('two serve replicas on one database', (baseUrl) => {
  const enabled = registryAvailable()
  let registry: TestRegistry | undefined
  let a: Stack
  let b: RunningServe
  const api = async (s: { url: string }, method: string, path: string, body?: unknown, key = a.serve.adminKey) => {
    const res = await fetch(`${s.url}/v1${path}`, {
      method, headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) }, ...(body ? { body: JSON.stringify(body) } : {}),
    })
    return { status: res.status, body: await res.json() as any }
  }

  beforeAll(async () => {
    if (!enabled) return
    const results = resolve(import.meta.dirname, '../../test-results')
    mkdirSync(results, { recursive: true })
    appendFileSync(join(results, 'pg-suites-ran'), 'replicas.test.ts\n')
    registry = await startRegistry()
    // What replicas share besides the database: the registry and the master key (sealed material).
    const env = { CORRAL_PACK_REGISTRY: `${registry.host}/corral`, CORRAL_MASTER_KEY: 'a1'.repeat(32) }
    const args = ['--lease-ttl', LEASE_TTL]
    a = await startStack({ runtime: RUNTIME, db: { postgres: baseUrl }, model: script, env, args, role: { name: 'coder', capabilities: '- name: model\n  type: http\n  allow:\n    - domains: ["127.0.0.1"]\n      methods: [POST]\n      paths: [/v1/messages]\n' } })
    const dbUrl = /--db (\S+)/.exec(a.serve.process.spawnargs.join(' '))![1]!
    b = await startServe({ db: dbUrl, env: { ...env, CORRAL_UPSTREAM_CA: join(a.dir, 'upstream-ca.pem') }, args: ['--runtime', RUNTIME, ...args] })
  }, 90_000)

  afterAll(async () => {
    await b?.stop()
    await a?.close()
    await registry?.stop()
  })

  it.runIf(enabled)('a key revoked on A is refused on B at once; B\'s org stream carries A\'s events', async () => {
    const stream = await fetch(`${b.url}/v1/activity/stream?filter=event_type=api_key_created`, { headers: { authorization: `Bearer ${a.serve.adminKey}` } })
    expect(stream.status).toBe(200)
    const key = (await api(a.serve, 'POST', '/api-keys', { label: 'replicated', permission_set: 'read_only' })).body
    expect((await api(b, 'GET', '/me', undefined, key.value)).status).toBe(200)
    const reader = stream.body!.getReader()
    let text = ''
    while (!text.includes(key.id)) {
      const { value, done } = await reader.read()
      if (done) break
      text += new TextDecoder().decode(value)
    }
    await reader.cancel()
    expect(text).toContain(key.id)
    expect((await api(a.serve, 'DELETE', `/api-keys/${key.id}`)).status).toBe(200)
    expect((await api(b, 'GET', '/me', undefined, key.value)).status).toBe(401)
  })

  it.runIf(enabled)('50 parallel requests through both proxies never pass max_concurrent 5 or max 20; a role change on A reaches B\'s proxy', async () => {
    // An upstream that holds every request a while and counts how many it holds at once.
    let inFlight = 0
    let maxInFlight = 0
    let served = 0
    const tls = await a.upstreamTls('127.0.0.1')
    const upstream: Server = createServer(tls, (_req, res) => {
      inFlight++
      served++
      maxInFlight = Math.max(maxInFlight, inFlight)
      setTimeout(() => {
        inFlight--
        res.end('{"ok":true}')
      }, 150)
    })
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r))
    const port = (upstream.address() as AddressInfo).port
    const dbUrl = /--db (\S+)/.exec(a.serve.process.spawnargs.join(' '))![1]!
    const store = await openStore(dbUrl)
    let token: string
    let roleId: string
    try {
      const org = (await store.orgs.getByName('default'))!
      const t = proxyTables(store.db)
      const provider = await t.workspaces.createProvider(org.id, { name: 'budgeted' })
      roleId = await t.workspaces.createRole(org.id, { name: 'budgeted', provider_id: provider, capabilities: budgetCaps(port) })
      const workspaceId = await t.workspaces.create(org.id, { role_id: roleId, created_by_user_id: 'usr_replicas' })
      token = (await new CapabilityTokens(await loadTokenKey(store.settings)).mint({ org_id: org.id, workspace_id: workspaceId }, 600)).token
    } finally {
      await store.close()
    }
    const proxies = [a.proxyUrl, /proxy (http:\/\/[^\s,)]+)/.exec(b.output())![1]!]
    // Each replica's proxy signs with the CA of its own data dir.
    const cas = [a.serve.dataDir, b.dataDir].map((d) => readFileSync(join(d, 'ca.pem'), 'utf8'))
    const agents = proxies.map((uri, i) => new ProxyAgent({ uri, token: `Bearer ${token}`, requestTls: { ca: cas[i] }, connections: 50 }))
    const statuses: number[] = []
    try {
      // Rounds of 50 parallel requests (25 through each proxy) until the ceiling refuses (bounded).
      for (let round = 0; round < 12 && !statuses.includes(-1); round++) {
        const answers = await Promise.all(Array.from({ length: 50 }, async (_, i) => {
          const res = await undiciFetch(`https://127.0.0.1:${port}/r${round}/${i}`, { dispatcher: agents[i % 2]! })
          const body = await res.text()
          return res.status === 429 && body.includes('budget_exhausted') ? -1 : res.status
        }))
        statuses.push(...answers)
      }
      // A role change made on A reaches B's proxy at once: GET is no longer allowed there.
      const patched = await api(a.serve, 'PATCH', `/agent-roles/${roleId}`, { capabilities: budgetCaps(port).replace('methods: [GET]', 'methods: [POST]') })
      expect(patched.status, JSON.stringify(patched.body)).toBe(200)
      const after = await undiciFetch(`https://127.0.0.1:${port}/after-change`, { dispatcher: agents[1]! })
      expect({ status: after.status, body: await after.text() }).toMatchObject({ status: 403, body: expect.stringContaining('no_match') })
    } finally {
      await Promise.all(agents.map((x) => x.close()))
      upstream.close()
    }
    expect(maxInFlight).toBeLessThanOrEqual(5)
    expect(served).toBeLessThanOrEqual(20)
    expect(statuses.filter((s) => s === 200)).toHaveLength(served)
    expect(statuses).toContain(-1) // the ceiling was reached
    expect(statuses.filter((s) => s !== 200 && s !== 429 && s !== -1)).toEqual([])
  }, 120_000)

  it.runIf(enabled)('every cache is coherent across replicas: a secret, a credential, a provider changed on A and an org posture set in the store reach B at once', async () => {
    // An upstream that records what each request carried (after the proxy's transforms).
    const seen: Array<Record<string, string | string[] | undefined>> = []
    const tls = await a.upstreamTls('127.0.0.1')
    const upstream: Server = createServer(tls, (req, res) => {
      seen.push(req.headers)
      res.end('{"ok":true}')
    })
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r))
    const port = (upstream.address() as AddressInfo).port
    const caps = `
- name: gh
  type: http
  allow:
    - domains: ["127.0.0.1:${port}"]
      allow_private: ["127.0.0.0/8"]
      methods: [GET]
  transforms:
    - name: key
      header: { name: x-api-key, action: set, value: 'secrets["cache_key"]' }
    - name: auth
      auth: { credential: cache-bot, provider: github }
`
    const dbUrl = /--db (\S+)/.exec(a.serve.process.spawnargs.join(' '))![1]!
    const store = await openStore(dbUrl)
    let token: string
    let orgId: string
    let workspaceId: string
    try {
      const org = (await store.orgs.getByName('default'))!
      orgId = org.id
      const t = proxyTables(store.db)
      const provider = await t.workspaces.createProvider(org.id, { name: 'cache-github' })
      const roleId = await t.workspaces.createRole(org.id, { name: 'cache-role', provider_id: provider, capabilities: caps })
      workspaceId = await t.workspaces.create(org.id, { role_id: roleId, created_by_user_id: 'usr_replicas' })
      token = (await new CapabilityTokens(await loadTokenKey(store.settings)).mint({ org_id: org.id, workspace_id: workspaceId }, 600)).token
    } catch (err) {
      await store.close()
      throw err
    }
    const bProxy = /proxy (http:\/\/[^\s,)]+)/.exec(b.output())![1]!
    const agent = new ProxyAgent({ uri: bProxy, token: `Bearer ${token}`, requestTls: { ca: readFileSync(join(b.dataDir, 'ca.pem'), 'utf8') } })
    const throughB = async (path: string) => {
      const res = await undiciFetch(`https://127.0.0.1:${port}${path}`, { dispatcher: agent })
      await res.text()
      return { status: res.status, headers: seen.at(-1) }
    }
    try {
      expect((await api(a.serve, 'POST', '/secrets', { name: 'cache_key', value: 'sk-first' })).status).toBe(201)
      const cred = await api(a.serve, 'POST', '/credentials', { name: 'cache-bot', provider: 'github', kind: 'static_token', token: 'ghp_first' })
      expect(cred.status, JSON.stringify(cred.body)).toBe(201)
      // B loads and caches the workspace, its policy, the secret and the credential.
      expect(await throughB('/one')).toMatchObject({ status: 200, headers: { 'x-api-key': 'sk-first', authorization: 'Bearer ghp_first' } })

      // Secrets (corral_secrets) and credentials (corral_credentials): changed on A, used by B at once.
      expect((await api(a.serve, 'POST', '/secrets', { name: 'cache_key', value: 'sk-second' })).status).toBe(201)
      expect((await api(a.serve, 'DELETE', `/credentials/${cred.body.id}`)).status).toBe(200)
      expect((await api(a.serve, 'POST', '/credentials', { name: 'cache-bot', provider: 'github', kind: 'static_token', token: 'ghp_second' })).status).toBe(201)
      expect(await throughB('/two')).toMatchObject({ status: 200, headers: { 'x-api-key': 'sk-second', authorization: 'Bearer ghp_second' } })

      // Providers (corral_roles_changed): renamed on A, B's next decision row names the new provider.
      const renamed = await api(a.serve, 'PATCH', `/providers/${(await store.providers.getByName(orgId, 'cache-github'))!.id}`, { name: 'cache-github-2' })
      expect(renamed.status, JSON.stringify(renamed.body)).toBe(200)
      expect((await throughB('/three')).status).toBe(200)
      const rows = async () => (await store.audit.page(orgId, { filters: [], workspaceId, order: 'asc', limit: 100 }))
        .filter((e) => e.event_type === 'policy_decision') as Array<{ agent_provider?: string }>
      let providers: Array<string | undefined> = []
      for (let i = 0; i < 100 && providers.length < 3; i++) {
        providers = (await rows()).map((e) => e.agent_provider)
        if (providers.length < 3) await new Promise((r) => setTimeout(r, 50))
      }
      expect(providers).toContain('cache-github-2')

      // Org posture: never cached (read with the key on every request) — set in the store (an
      // operator's admin command), B refuses writes at once; back to active, B accepts them.
      await store.orgs.setPosture(orgId, 'past_due')
      const refused = await api(b, 'POST', '/api-keys', { label: 'while-past-due', permission_set: 'read_only' })
      expect({ status: refused.status, code: refused.body.error?.code }).toEqual({ status: 403, code: 'tenant_inactive' })
      await store.orgs.setPosture(orgId, 'active')
      expect((await api(b, 'POST', '/api-keys', { label: 'active-again', permission_set: 'read_only' })).status).toBe(201)
    } finally {
      await agent.close()
      upstream.close()
      await store.close()
    }
  }, 120_000)

  it.runIf(enabled)('a warm pool across two real serves holds at its target; parallel claims through both get distinct members', async () => {
    const coder = (await api(a.serve, 'GET', '/agent-roles?name=coder')).body.agent_roles[0]
    const made = await api(a.serve, 'POST', '/agent-roles', { name: 'pooled', provider_id: coder.provider_id, capabilities: coder.capabilities, pool_policy: 'static', pool_size: 3 })
    expect(made.status, JSON.stringify(made.body)).toBe(201)
    const roleId = made.body.id as string
    const members = async () => ((await api(b, 'GET', '/workspaces?role=pooled')).body.workspaces as Array<{ id: string; state: string; pooled: boolean }>)
      .filter((w) => w.pooled && (w.state === 'provisioning' || w.state === 'idle'))
    const waitIdle = async () => {
      for (let i = 0; i < 300; i++) {
        const m = await members()
        if (m.length >= 3 && m.every((w) => w.state === 'idle')) return m
        await new Promise((r) => setTimeout(r, 100))
      }
      throw new Error(`the pool did not fill: ${JSON.stringify(await members())}`)
    }
    const pool = await waitIdle()
    // Both replicas run fill passes every 5 s: after two more passes on each the pool is still 3.
    await new Promise((r) => setTimeout(r, 11_000))
    const later = await members()
    expect(later.map((w) => w.id).sort()).toEqual(pool.map((w) => w.id).sort())
    const ownersOf = async (ids: string[]) => {
      const store = await openStore(/--db (\S+)/.exec(a.serve.process.spawnargs.join(' '))![1]!)
      try {
        return await replicaLeases(store).liveOwners(ids)
      } finally {
        await store.close()
      }
    }
    expect((await ownersOf(pool.map((w) => w.id))).size).toBe(3)
    // Stop refilling, then claim: 3 creates, 2 through A and 1 through B, at once.
    expect((await api(a.serve, 'PATCH', `/agent-roles/${roleId}`, { pool_size: 0 })).status).toBe(200)
    const claims = await Promise.all([a.serve, b, a.serve].map((s) => api(s, 'POST', '/workspaces', { role_id: roleId })))
    for (const c of claims) expect(c.status, JSON.stringify(c.body)).toBe(201)
    const ids = claims.map((c) => c.body.id as string)
    expect(new Set(ids).size).toBe(3)
    expect(new Set(ids)).toEqual(new Set(pool.map((w) => w.id)))
    // Their agents would compete with the next test's: stop them (through B, whoever owns them).
    for (const id of ids) expect((await api(b, 'POST', `/workspaces/${id}/stop`)).status).toBe(200)
  }, 120_000)

  it.runIf(enabled)('kill -9 of A mid-task: B takes the workspace over, the task fails replica_lost, a follow-up runs on B and forks from B', async () => {
    const submitted = await api(a.serve, 'POST', '/tasks', { role_name: 'coder', description: 'write a file' })
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(202)
    const first = submitted.body
    const ws = first.workspace_id as string
    const firstDone = await a.taskDone(first.task_id)
    expect(firstDone.status, JSON.stringify(firstDone)).toBe('completed')
    // The after-task snapshot is taken once the agent has exited; then the workspace is idle.
    await a.until(async () => (await api(a.serve, 'GET', `/workspaces/${ws}`)).body.state === 'idle', 'the workspace idle after its first task')
    const long = await api(a.serve, 'POST', `/workspaces/${ws}/tasks`, { description: 'long task' })
    expect(long.status, JSON.stringify(long.body)).toBe(202)
    const longId = long.body.task_id as string
    // Any replica answers: B sees the task running on A.
    await a.until(async () => (await api(b, 'GET', `/tasks/${longId}`)).body.status === 'running', 'the long task running')
    a.serve.process.kill('SIGKILL')
    const until = async <T>(probe: () => Promise<T | false | undefined>, what: string): Promise<T> => {
      for (let i = 0; i < 600; i++) {
        const v = await probe()
        if (v) return v
        await new Promise((r) => setTimeout(r, 100))
      }
      throw new Error(`timed out waiting for ${what}\n${b.output().slice(-3000)}`)
    }
    const ended = await until(async () => {
      const t = (await api(b, 'GET', `/tasks/${longId}`)).body
      return t.status !== 'running' && t
    }, 'the long task to end on B')
    expect(ended).toMatchObject({ status: 'failed', reason: 'replica_lost' })
    await until(async () => (await api(b, 'GET', `/workspaces/${ws}`)).body.state === 'idle', 'the workspace idle on B')
    // A follow-up task on B sees A's file (restored from the registry snapshot) and completes.
    const follow = await api(b, 'POST', `/workspaces/${ws}/tasks`, { description: 'read it back' })
    expect(follow.status, JSON.stringify(follow.body)).toBe(202)
    const done = await until(async () => {
      const t = (await api(b, 'GET', `/tasks/${follow.body.task_id}`)).body
      return ['completed', 'failed', 'cancelled'].includes(t.status) && t
    }, 'the follow-up task on B')
    expect(done.status, JSON.stringify(done)).toBe('completed')
    await until(async () => (await api(b, 'GET', `/workspaces/${ws}`)).body.state === 'idle', 'the workspace idle after the follow-up')
    const files = (await api(b, 'GET', `/workspaces/${ws}/snapshot/files`)).body.entries
    expect(files.map((f: any) => f.path)).toEqual(expect.arrayContaining(['before.txt', 'after-takeover.txt']))
    expect(files.find((f: any) => f.path === 'after-takeover.txt').size).toBe('written on A\n'.length)
    const count = (await api(b, 'GET', `/workspaces/${ws}`)).body.task_count as number
    const child = await api(b, 'POST', `/workspaces/${ws}/fork`, { fork_point_task_count: count })
    expect(child.status).toBe(202)
    await until(async () => (await api(b, 'GET', `/workspaces/${child.body.workspace_id}`)).body.state === 'idle', 'the fork provisioned on B')
  }, 180_000)
})
