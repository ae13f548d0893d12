// What bench/proxy.ts starts: child processes (each run's are stopped before the next run starts),
// the seeded store (a workspace, its credential and token, the realistic policy below), and
// `corral proxy` itself. corral runs in a mount namespace of its own whose /etc/hosts names
// BENCH_NAME as 127.0.0.1, so the transparent mode's name resolves for the proxy (which dials by
// its own resolution) without touching the host's files.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { copyFileSync, existsSync, readdirSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { createAuditWriter } from '../src/audit/index.js'
import { isStaticAuthProvider } from '../src/policy/index.js'
import { CapabilityTokens, OrgMaterialAdmin, Sealer, loadMasterKey, loadTokenKey } from '../src/secrets/index.js'
import { openStore } from '../src/store/index.js'
import { proxyTables } from '../src/store/proxy-tables.js'
import { BENCH_NAME } from './proxy-load.js'
import { CERTGEN, has } from './proxy-peers.js'

export const ROOT = resolve(import.meta.dirname, '..')

const DOMAINS = '["127.0.0.1:UPSTREAM_PORT", "127.0.0.1:H2_PORT", "NAME:UPSTREAM_PORT"]'
const CAPS = `
- name: llm
  type: http
  allow:
    - name: messages
      domains: ${DOMAINS}
      allow_private: ["127.0.0.0/8"]
      methods: [POST]
      paths: ["/v1/messages"]
      request_format: application/json
      match:
        requires_body: true
        expr: request.body.model == "claude-bench" && request.body.max_tokens <= 4096
    - name: mcp
      domains: ${DOMAINS}
      allow_private: ["127.0.0.0/8"]
      methods: [POST]
      paths: ["/mcp"]
      mcp:
        tools:
          - name: create_issue
            input_schema: {type: object, properties: {project: {type: string}, title: {type: string}, priority: {type: integer}, labels: {type: array, items: {type: string}}}, required: [project, title], additionalProperties: false}
            when: 'args.project in ["web", "api"] && size(args.title) <= 120 && args.priority >= 2 && args.labels.all(l, l != "security")'
    - name: stream
      domains: ${DOMAINS}
      allow_private: ["127.0.0.0/8"]
      methods: [GET]
      paths: ["/v1/stream", "/v1/hold"]
    - name: socket
      domains: ${DOMAINS}
      allow_private: ["127.0.0.0/8"]
      methods: [GET]
      paths: ["/v1/ws"]
  transforms:
    - name: version
      header: { name: anthropic-version, action: set, value: '"2023-06-01"' }
    - name: identity
      header: { name: accept-encoding, action: set, value: '"identity"' }
    - name: key
      auth: { credential: anthropic-key, provider: anthropic }
  budgets:
    counters:
      - name: requests
        source: request.count
        workspace: { max: 1000000000 }
      - name: tokens
        source: response
        requires_body: true
        framing: sse
        format: application/json
        encoding: identity
        sse_event: message_delta
        value: event.data.usage.output_tokens
        accumulator: max
        terminal_event_type: message_stop
        status_codes: ["2xx"]
        workspace: { max: 0 }
      - name: ws_messages
        source: websocket.messages
        workspace: { max: 0 }
`

/** Every child started; `stopSince(n)` stops those started after the n-th. */
export const children: ChildProcess[] = []

export async function stopSince(n: number): Promise<void> {
  const mine = children.splice(n)
  for (const c of mine) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM')
  // Let them exit cleanly (the corral proxy writes its --cpu-prof on exit).
  // One that has not exited after 8 s (busy starting on a loaded machine) is killed: none outlives the bench.
  await Promise.all(mine.map((c) => (c.exitCode !== null || c.signalCode !== null ? undefined : new Promise((r) => {
    c.once('exit', r)
    setTimeout(() => (c.kill('SIGKILL'), setTimeout(r, 1_000)), 8_000)
  }))))
}

export function spawnUntil(cmd: string, args: string[], pattern: RegExp, opts: { env?: NodeJS.ProcessEnv } = {}): Promise<{ child: ChildProcess; match: RegExpExecArray }> {
  const child = spawn(cmd, args, { env: { ...process.env, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] })
  children.push(child)
  let out = ''
  return new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`${cmd} did not start:\n${out}`)), 90_000)
    const on = (c: Buffer): void => {
      out += String(c)
      const m = pattern.exec(out)
      if (m) {
        clearTimeout(timer)
        res({ child, match: m })
      }
    }
    child.stdout!.on('data', on)
    child.stderr!.on('data', on)
    child.once('exit', (code) => rej(new Error(`${cmd} exited ${code}:\n${out}`)))
  })
}

export function ensurePackages(): { squid: boolean; mitm: boolean } {
  // squid-openssl, not squid: ssl-bump needs the OpenSSL flavour (and its security_file_certgen);
  // installing `squid` would replace it with the flavour that cannot intercept.
  const bump = (): boolean => has('squid') && existsSync(CERTGEN)
  const missing = [...(bump() ? [] : ['squid-openssl']), ...(has('mitmdump') ? [] : ['mitmproxy'])]
  if (missing.length) {
    process.stderr.write(`installing ${missing.join(' ')} with apt-get …\n`)
    try {
      execFileSync('apt-get', ['install', '-y', '-q', ...missing], { stdio: 'ignore', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } })
    } catch {
      process.stderr.write('apt-get failed; peers that are missing are skipped\n')
    }
  }
  return { squid: has('squid'), mitm: has('mitmdump') }
}

export interface Seeded { dataDir: string; dbUrl: string; token: string; workspaceId: string }

/** The realistic bench policy, its domains the upstreams' (HTTP/1.1 and h2) and BENCH_NAME's. */
export function benchCapabilities(upPort: number, h2Port = upPort): string {
  return CAPS.replaceAll('UPSTREAM_PORT', String(upPort)).replaceAll('H2_PORT', String(h2Port)).replaceAll('NAME', BENCH_NAME)
}

/** A workspace under `capabilities`, its credential and a capability token in the store at `dbUrl`, as the control plane would seed them. */
export async function seedWorkspace(dbUrl: string, dataDir: string, capabilities: string): Promise<{ token: string; workspaceId: string }> {
  const store = await openStore(dbUrl)
  const org = (await store.orgs.create({ name: 'bench' }))!
  const t = proxyTables(store.db)
  const prov = await t.workspaces.createProvider(org.id, { name: 'anthropic' })
  const role = await t.workspaces.createRole(org.id, { name: 'bench', provider_id: prov, capabilities })
  const ws = await t.workspaces.create(org.id, { role_id: role, created_by_user_id: 'usr_bench' })
  const audit = createAuditWriter(store)
  await new OrgMaterialAdmin(store, new Sealer(await loadMasterKey(dataDir)), audit, isStaticAuthProvider)
    .createCredential({ orgId: org.id, userId: 'usr_bench' }, { name: 'anthropic-key', provider: 'anthropic', kind: 'static_token', token: 'sk-bench' })
  const token = (await new CapabilityTokens(await loadTokenKey(store.settings)).mint({ org_id: org.id, workspace_id: ws }, 3600)).token
  await audit.close()
  await store.close()
  return { token, workspaceId: ws }
}

/** The bench's store and data dir in `tmp`, seeded with the realistic policy, and the hosts file naming BENCH_NAME. */
export async function seed(tmp: string, upPort: number, h2Port: number): Promise<Seeded> {
  const dataDir = join(tmp, 'data')
  const dbUrl = `sqlite:${join(tmp, 'corral.db')}`
  const { token, workspaceId } = await seedWorkspace(dbUrl, dataDir, benchCapabilities(upPort, h2Port))
  writeFileSync(join(tmp, 'hosts'), `127.0.0.1 localhost\n127.0.0.1 ${BENCH_NAME}\n`)
  return { dataDir, dbUrl, token, workspaceId }
}

/**
 * The baseline's own copy of the seeded store: an older build refuses a database that ran
 * migrations it does not know, so they are forgotten in the copy (the columns they added stay;
 * older code does not read them).
 */
export function baselineStore(dbUrl: string, baseRoot: string): string {
  const file = dbUrl.slice('sqlite:'.length)
  const copy = `${file}.base.db`
  if (existsSync(copy)) return `sqlite:${copy}`
  copyFileSync(file, copy)
  const known = new Set(readdirSync(join(resolve(baseRoot), 'dist/store/migrations')).filter((f) => f.endsWith('.js')).map((f) => f.slice(0, -3)))
  const db = new BetterSqlite3(copy)
  for (const { name } of db.prepare('SELECT name FROM kysely_migration').all() as { name: string }[]) {
    if (!known.has(name)) db.prepare('DELETE FROM kysely_migration WHERE name = ?').run(name)
  }
  db.close()
  return `sqlite:${copy}`
}

export interface Running { pid: number; url: string }

/**
 * `corral proxy` from `root` (its built binary when dist/ exists, else its sources) in a mount
 * namespace with the bench's hosts file; the pid is node's (unshare and sh exec it).
 */
export async function startCorral(o: { root: string; tmp: string; dataDir: string; dbUrl: string; workers?: number; nodeArgs: string[]; env: Record<string, string> }): Promise<Running> {
  const built = existsSync(join(o.root, 'dist/commands/proxy.js'))
  const entry = built ? [join(o.root, 'bin/run.js')] : ['--import', 'tsx', join(o.root, 'bin/dev.js')]
  const args = [...o.nodeArgs, ...entry, 'proxy', ...(o.workers ? ['--workers', String(o.workers)] : []),
    '--data-dir', o.dataDir, '--db', o.dbUrl, '--port', '0', '--upstream-ca', join(o.tmp, 'upca/ca.pem')]
  const p = await spawnUntil('unshare', ['--mount', '--propagation', 'private', '--', 'sh', '-c', 'mount --bind "$0" /etc/hosts && exec "$@"', join(o.tmp, 'hosts'), process.execPath, ...args],
    /ready: (http:\/\/\S+)/, { env: o.env })
  return { pid: p.child.pid!, url: p.match[1]! }
}
