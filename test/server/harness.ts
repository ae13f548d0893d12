// Builds the real app over a real store (temp SQLite by default, or any opener such as the
// Postgres one from test/helpers/dialects.ts) and drives it with inject(). Each test makes its
// own org, so tests never share data.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance, InjectOptions } from 'fastify'
import { createAuditBus, createAuditWriter, type AuditBus, type AuditWriter } from '../../src/audit/index.js'
import { openStore, type Store } from '../../src/store/index.js'
import { buildApp } from '../../src/server/app.js'
import { displayPrefix, generateApiKeySecret, hashApiKeySecret } from '../../src/server/auth/api-key-secret.js'
import { createLogger } from '../../src/server/logger.js'
import { BuiltinIdentityProvider, Identity, type ApiKeyProvisioner, type IdentityProvider } from '../../src/server/identity/index.js'
import type { PermissionSet, Role } from '../../src/server/permissions.js'
import type { ServerConfig, ServerDeps, WorkspaceDirectory } from '../../src/server/types.js'
import { NO_LIFECYCLE, NO_WORKSPACE_CONTROL, NO_WORKSPACES } from '../../src/server/index.js'
import { registrySettingsFromEnv } from '../../src/packs/index.js'
import type { Sealer } from '../../src/secrets/index.js'

export interface HarnessOptions {
  open?: () => Promise<Store>
  config?: Partial<ServerConfig>
  workspaces?: WorkspaceDirectory
  externalIdentity?: IdentityProvider[]
  keys?: ApiKeyProvisioner
  logs?: NodeJS.WritableStream
  /** Seals secrets and credentials; without one their routes answer 503 (an app given no master key). */
  sealer?: Sealer
  /** The audit writer (default: one without a journal, as before). */
  audit?: (store: Store) => Promise<AuditWriter>
}

export async function sqliteOpener(): Promise<{ open: () => Promise<Store>; cleanup: () => void }> {
  const dir = mkdtempSync(join(tmpdir(), 'corral-server-'))
  return { open: () => openStore(`sqlite:${join(dir, 'corral.db')}`), cleanup: () => rmSync(dir, { recursive: true, force: true }) }
}

export interface Harness {
  app: FastifyInstance
  store: Store
  audit: AuditWriter
  bus: AuditBus
  builtin: BuiltinIdentityProvider
  deps: ServerDeps
  /** A fresh org with an owner user (session token) and a full_access key. */
  newOrg(): Promise<{ orgId: string; ownerKey: string; ownerToken: string; ownerId: string }>
  key(orgId: string, set: PermissionSet): Promise<{ id: string; value: string }>
  member(orgId: string, role: Role, email?: string): Promise<{ userId: string; token: string }>
  inject(method: InjectOptions['method'], url: string, opts?: { token?: string; body?: unknown; headers?: Record<string, string>; payload?: string }): Promise<{ status: number; body: any; headers: Record<string, unknown>; raw: string }>
  close(): Promise<void>
}

let counter = 0

export async function createHarness(opts: HarnessOptions = {}): Promise<Harness> {
  const sqlite = opts.open ? undefined : await sqliteOpener()
  const store = await (opts.open ?? sqlite!.open)()
  const logger = createLogger({ level: opts.logs ? 'info' : 'silent', destination: opts.logs })
  const audit = opts.audit ? await opts.audit(store) : createAuditWriter(store, { flushIntervalMs: 1, logger })
  const bus = createAuditBus(store, { logger })
  await bus.ready
  const builtin = await BuiltinIdentityProvider.open(store.settings)
  const deps: ServerDeps = {
    store,
    audit,
    bus,
    logger,
    identity: new Identity(builtin, opts.externalIdentity, opts.keys),
    config: { rateLimit: false, webhookSecret: 'whsec_test', ...opts.config },
    // An API-only app: no workspace lifecycle and no pack content store unless a test plugs one in.
    workspaces: opts.workspaces ?? NO_WORKSPACES,
    workspaceControl: NO_WORKSPACE_CONTROL,
    lifecycle: NO_LIFECYCLE,
    packContent: null,
    packRegistry: registrySettingsFromEnv({}),
    sealer: opts.sealer ?? null,
  }
  const app = await buildApp(deps)
  await app.ready()

  const key = async (orgId: string, set: PermissionSet) => {
    const value = generateApiKeySecret()
    const k = await store.apiKeys.create(orgId, { label: `${set} key`, permission_set: set, secret_hash: hashApiKeySecret(value), prefix: displayPrefix(value) })
    return { id: k.id, value }
  }
  const member = async (orgId: string, role: Role, email = `u${++counter}-${Date.now()}@example.com`) => {
    const user = await store.users.create({ email })
    await store.memberships.invite(orgId, { user_id: user.id, email: user.email, role, status: 'active' })
    return { userId: user.id, token: await builtin.issue({ userId: user.id, orgId }) }
  }

  return {
    app,
    store,
    audit,
    bus,
    builtin,
    deps,
    key,
    member,
    async newOrg() {
      const org = await store.orgs.create({ name: `org-${++counter}-${Date.now()}` })
      const owner = await member(org!.id, 'owner')
      const ownerKey = await key(org!.id, 'full_access')
      return { orgId: org!.id, ownerKey: ownerKey.value, ownerToken: owner.token, ownerId: owner.userId }
    },
    async inject(method, url, o = {}) {
      const headers: Record<string, string> = { ...o.headers }
      if (o.token) headers.authorization = `Bearer ${o.token}`
      let payload: string | undefined = o.payload
      if (o.body !== undefined) {
        payload = JSON.stringify(o.body)
        headers['content-type'] ??= 'application/json'
      } else if (payload !== undefined) headers['content-type'] ??= 'application/json'
      const res = await app.inject({ method, url, headers, payload })
      let body: unknown
      try {
        body = res.json()
      } catch {
        body = undefined
      }
      return { status: res.statusCode, body, headers: res.headers, raw: res.body }
    },
    async close() {
      await app.close()
      await audit.close()
      await bus.close()
      await store.close()
      sqlite?.cleanup()
    },
  }
}
