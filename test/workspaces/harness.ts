// A workspace controller over a real store and the real `process` runtime, with the stand-in agent
// (stand-in-agent.mjs) instead of the model-driven one. Each call makes a fresh org, provider and role.
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { createAuditWriter, type AuditWriter } from '../../src/audit/index.js'
import type { CapabilityClaims } from '../../src/contract/index.js'
import { CapabilityTokens } from '../../src/secrets/index.js'
import { AgentEvents, WorkspaceService, type Actor } from '../../src/workspaces/index.js'
import type { Store } from '../../src/store/index.js'
import { proxyTables } from '../../src/store/proxy-tables.js'
import type { PackSource } from '../../src/workspaces/index.js'
import type { RoleConfig } from '../../src/store/index.js'
import { processRuntime, type DirectoryRuntimeUnderTest } from '../runtime/drivers.js'

export const STAND_IN_AGENT = resolve(import.meta.dirname, 'stand-in-agent.mjs')

export interface ControllerRig {
  store: Store
  audit: AuditWriter
  runtime: DirectoryRuntimeUnderTest
  tokens: CapabilityTokens
  controller: WorkspaceService
  events: AgentEvents
  root: string
  orgId: string
  role: RoleConfig
  actor: Actor
  /** A new controller over the same store and runtime root (a restarted serve). */
  restart(): Promise<WorkspaceService>
  close(): Promise<void>
}

export interface RigOptions {
  taskTimeoutSeconds?: number
  idleTimeoutSeconds?: number
  poolSize?: number
  /** `static` unless set (with poolSize). */
  poolPolicy?: 'static' | 'dynamic'
  poolMaxSize?: number
  /** The controller's clock (ControllerOptions.now). */
  now?: () => number
  /** Where roles' packs come from (ControllerOptions.packs). */
  packs?: PackSource
  /** argv of the default agent (the stand-in unless set). */
  agentCommand?: string[]
  /** ControllerOptions.diskQuotaMb and diskCheckIntervalMs. */
  disk?: { quotaMb: number; intervalMs: number }
  /** The runtime under the controller, given its root (the process runtime unless set). */
  runtime?: (root: string) => DirectoryRuntimeUnderTest
  /** ControllerOptions.sandboxUids: each workspace's agent a uid of its own from this range. */
  sandboxUids?: { first: number; count: number }
}

export async function controllerRig(store: Store, opts: RigOptions = {}): Promise<ControllerRig> {
  const root = mkdtempSync(join(tmpdir(), 'corral-ctl-'))
  const audit = createAuditWriter(store, { flushIntervalMs: 1 })
  const runtime = opts.runtime?.(join(root, 'runtime')) ?? processRuntime({ root: join(root, 'runtime'), proxy: { host: '127.0.0.1', port: 9 }, warn: () => {}, stopGraceMs: 500 })
  const tokens = new CapabilityTokens(new Uint8Array(randomBytes(32)))
  const make = () => new WorkspaceService({
    store, audit, runtime, tokens, agentCommand: opts.agentCommand ?? [process.execPath, STAND_IN_AGENT], stagingRoot: join(root, 'uploads'), reconcileIntervalMs: 60_000,
    ...(opts.now ? { now: opts.now } : {}),
    ...(opts.packs ? { packs: opts.packs } : {}),
    ...(opts.disk ? { diskQuotaMb: opts.disk.quotaMb, diskCheckIntervalMs: opts.disk.intervalMs } : {}),
    ...(opts.sandboxUids ? { sandboxUids: opts.sandboxUids } : {}),
  })
  const org = await store.orgs.create({ name: `org-${randomBytes(4).toString('hex')}` })
  const t = proxyTables(store.db)
  const providerId = await t.workspaces.createProvider(org!.id, { name: 'anthropic' })
  const roleId = await t.workspaces.createRole(org!.id, { name: 'coder', provider_id: providerId })
  await store.db.updateTable('agent_roles' as never).set({
    task_timeout_seconds: opts.taskTimeoutSeconds ?? null, idle_timeout_seconds: opts.idleTimeoutSeconds ?? null,
    ...(opts.poolSize !== undefined ? { pool_policy: opts.poolPolicy ?? 'static', pool_size: opts.poolSize, pool_max_size: opts.poolMaxSize ?? null } : {}),
  } as never).where('id' as never, '=', roleId as never).execute()
  let controller = make()
  await controller.start()
  const role = (await store.workspaces.role(org!.id, { id: roleId }))!
  const controllers = [controller]
  return {
    store, audit, runtime, tokens, controller, root, orgId: org!.id, role,
    events: new AgentEvents(controller, audit),
    actor: { userId: 'usr_test', creatorId: 'usr_test' },
    async restart() {
      controller = make()
      controllers.push(controller)
      await controller.start()
      return controller
    },
    async close() {
      for (const c of controllers) await c.close()
      await runtime.close()
      await audit.close()
      rmSync(root, { recursive: true, force: true })
    },
  }
}

/**
 * Hands a waiting warm stand-in its task, as its GET /tasks/next would: the stand-in polls for
 * task.json and reads it once it exists, so the file appears whole (written beside it, then
 * renamed). A plain write let it read an empty file under load and crash before its task's work.
 */
export function handTask(dataDir: string, task: unknown): void {
  const tmp = join(dataDir, '.task.json.tmp')
  writeFileSync(tmp, JSON.stringify(task))
  renameSync(tmp, join(dataDir, 'task.json'))
}

/** The claims of the start-up token that a waiting warm agent (the stand-in) was given. */
export async function warmClaims(rig: ControllerRig, dataDir: string): Promise<CapabilityClaims> {
  const check = await rig.tokens.check(`Bearer ${readFileSync(join(dataDir, 'warm.token'), 'utf8')}`)
  if (!check.ok) throw new Error('the warm agent has no valid start-up token')
  return check.claims
}

export async function waitFor<T>(probe: () => Promise<T | undefined | false>, what: string, timeoutMs = 15_000): Promise<T> {
  const until = Date.now() + timeoutMs
  for (;;) {
    const v = await probe()
    if (v) return v
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}
