// The workspace controller as one of `corral serve`'s services, started after the proxy (it needs
// the proxy's address, the corral CA and the capability-token key) and before the API (whose
// routes it serves through ServerDeps.workspaceControl / workspaces / controller).
// `--runtime local|process` (env CORRAL_RUNTIME, default local). A runtime whose check() fails
// does not stop serve: the reason is logged once in plain words and task creation answers
// service_unavailable with it, so the rest of the control plane stays usable. A configured
// workspace limit that cannot be enforced here does stop it (a clear error, non-zero exit), unless
// the operator opts out with --allow-unenforced-limits (CORRAL_ALLOW_UNENFORCED_LIMITS=1).
import { join, resolve } from 'node:path'
import { execa } from 'execa'
import { PackContent } from '../../packs/content.js'
import { CapabilityTokens, caCertPath, loadTokenKey, type AgentCallbackHandler } from '../../proxy/index.js'
import type { ServeOptions, ServiceFactory } from '../../server/serve.js'
import type { ServerDeps } from '../../server/types.js'
import { createRuntime, defaultAgentCommand, RUNTIME_KINDS, type LocalRuntimeOptions, type RuntimeKind } from '../index.js'
import { limitsFromEnv, type WorkspaceLimits } from '../limits.js'
import { AgentEvents, WorkspaceService, type PackSource } from '../../workspaces/index.js'

declare module '../../server/types.js' {
  interface ServerDeps {
    /** The workspace controller (routes/workspaces.ts, routes/tasks.ts); absent when serve runs without it. */
    controller?: WorkspaceService
    /** Why workspaces cannot run here (runtime check failed); task creation refuses with it. */
    workspacesUnavailable?: string
    /** The agent-callback handler, read by the proxy service's `agentCallbacks` option (proxy/serve-service.ts) until src/serve/ wires it. */
    agentCallbacks?: AgentCallbackHandler
  }
}

export const workspaceService: ServiceFactory = async ({ deps, options, services }) => {
  const env = options.env ?? process.env
  const kind = String(options.flags?.runtime ?? env.CORRAL_RUNTIME ?? 'local') as RuntimeKind
  if (!RUNTIME_KINDS.includes(kind)) throw new Error(`--runtime must be one of ${RUNTIME_KINDS.join(', ')} (got ${kind})`)
  const proxyAddress = services.find((s) => s.name === 'proxy')?.address?.()
  if (!proxyAddress) throw new Error('the workspace controller needs the proxy service, which did not start')
  const proxyUrl = new URL(proxyAddress)
  const limits = limitsFromEnv(env)
  const allowUnenforced = options.flags?.['allow-unenforced-limits'] === true || env.CORRAL_ALLOW_UNENFORCED_LIMITS === '1'
  const runtime = createRuntime(kind, {
    ...runtimeOptions(options, limits, proxyUrl, (line) => deps.logger.warn(line)),
    ...sandboxUidFromEnv(env),
    allowUnenforcedLimits: allowUnenforced,
  })
  const controller = new WorkspaceService({
    store: deps.store,
    audit: deps.audit,
    runtime,
    tokens: new CapabilityTokens(await loadTokenKey(deps.store.settings)),
    agentCommand: env.CORRAL_AGENT_COMMAND ? JSON.parse(env.CORRAL_AGENT_COMMAND) as string[] : defaultAgentCommand(),
    packs: packSource(deps, options.dataDir),
    stagingRoot: join(options.dataDir, 'uploads'),
    logger: deps.logger,
    // Checked on the host for every agent, whatever the driver (docs/runtime.md "Resource limits").
    diskQuotaMb: limits.diskMb,
    ...(env.CORRAL_AGENT_MAX_ITERATIONS ? { agentEnv: { CORRAL_MAX_ITERATIONS: env.CORRAL_AGENT_MAX_ITERATIONS } } : {}),
  })
  wire(deps, controller)
  deps.taskRateLimit = taskRateFromEnv(env)
  return {
    name: 'workspaces',
    async start() {
      const check = await runtime.check()
      const fatal = [...(check.fatal ?? [])]
      if (limits.diskMb > 0 && !(await duAvailable())) {
        const line = 'du (GNU coreutils) is not installed: the workspace disk quota (CORRAL_WORKSPACE_DISK_MB) cannot be measured on the host'
        if (allowUnenforced) deps.logger.warn(`${line} (started anyway: --allow-unenforced-limits)`)
        else fatal.push(`${line}; install coreutils, set CORRAL_WORKSPACE_DISK_MB=0, or pass --allow-unenforced-limits (CORRAL_ALLOW_UNENFORCED_LIMITS=1)`)
      }
      if (fatal.length > 0) throw new Error(`workspace limits cannot be enforced here: ${fatal.join('; ')}`)
      if (!check.ok) {
        deps.workspacesUnavailable = `the ${kind} workspace runtime cannot run here: ${check.problems.join('; ')}`
        deps.logger.warn(deps.workspacesUnavailable)
      }
      for (const w of check.warnings) deps.logger.warn(w)
      deps.agentCallbacks = new AgentEvents(controller, deps.audit)
      await controller.start()
    },
    async stop() {
      deps.agentCallbacks = undefined
      await controller.close()
      await runtime.close()
    },
  }
}

function wire(deps: ServerDeps, controller: WorkspaceService): void {
  deps.controller = controller
  deps.workspaceControl = controller
  deps.workspaces = {
    async get(orgId, id) {
      const ws = await controller.get(orgId, id)
      return ws ? { id: ws.id, created_by: ws.created_by } : undefined
    },
  }
}

/** The runtime's options from serve's: its root, the proxy, the CA, the limits, and what no sandbox may see. */
export function runtimeOptions(options: Pick<ServeOptions, 'dataDir' | 'dbUrl'>, limits: WorkspaceLimits, proxyUrl: URL,
  warn: (line: string) => void): LocalRuntimeOptions {
  return {
    root: join(options.dataDir, 'runtime'),
    proxy: { host: proxyUrl.hostname.replace(/^\[|\]$/g, ''), port: Number(proxyUrl.port) },
    caCertPath: caCertPath(options.dataDir),
    warn,
    // One reading of the limits for the sandbox and the controller's disk watch alike.
    limits,
    // The data dir holds the store, admin.key, the CA key, the webhook secret, packs and uploads.
    hidden: [options.dataDir, ...sqliteFiles(options.dbUrl)],
  }
}

/** CORRAL_SANDBOX_UID: the host uid root-run agents use (docs/runtime.md "Running as root"). */
export function sandboxUidFromEnv(env: NodeJS.ProcessEnv): { sandboxUid?: number } {
  const raw = env.CORRAL_SANDBOX_UID?.trim()
  if (!raw) return {}
  const uid = Number(raw)
  if (!Number.isInteger(uid) || uid < 1 || uid > 0xfffffffe) throw new Error(`CORRAL_SANDBOX_UID must be a uid above 0, got ${JSON.stringify(raw)}`)
  return { sandboxUid: uid }
}

/** Whether `du` runs here (the disk watch measures with it). */
async function duAvailable(): Promise<boolean> {
  return execa('du', ['--version'], { reject: false, timeout: 5000 }).then((r) => r.exitCode === 0)
}

/** A SQLite store's file and its journal siblings, when the store is SQLite (the capability-token key is in it). */
export function sqliteFiles(dbUrl: string | undefined): string[] {
  if (!dbUrl?.startsWith('sqlite:')) return []
  const path = dbUrl.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '')
  if (!path || path === ':memory:') return []
  const file = resolve(path)
  return [file, `${file}-wal`, `${file}-shm`, `${file}-journal`]
}

/** Packs for the controller: the store's visibility rule and the content trees under `<data dir>/packs`. */
function packSource(deps: ServerDeps, dataDir: string): PackSource {
  const own = new PackContent(join(dataDir, 'packs'))
  return {
    findVisible: (orgId, ids) => deps.store.packs.findVisible(orgId, ids),
    // The packs service's store when it runs (same root), else one of our own for reading.
    dir: (digest) => (deps.packContent ?? own).dir(digest),
    // Pins live in the store that collects trees (the routes' one).
    pin: (digest) => (deps.packContent ?? own).pin(digest),
  }
}

/** CORRAL_TASK_RATE_BURST (default 30) and CORRAL_TASK_RATE_PER_SECOND (default 0.5); either 0 disables. */
export function taskRateFromEnv(env: NodeJS.ProcessEnv): { capacity: number; refillPerSecond: number } | false {
  const burst = env.CORRAL_TASK_RATE_BURST === undefined || env.CORRAL_TASK_RATE_BURST === '' ? 30 : Number(env.CORRAL_TASK_RATE_BURST)
  const rate = env.CORRAL_TASK_RATE_PER_SECOND === undefined || env.CORRAL_TASK_RATE_PER_SECOND === '' ? 0.5 : Number(env.CORRAL_TASK_RATE_PER_SECOND)
  if (!Number.isFinite(burst) || !Number.isFinite(rate) || burst < 0 || rate < 0) {
    throw new Error('CORRAL_TASK_RATE_BURST and CORRAL_TASK_RATE_PER_SECOND must be non-negative numbers')
  }
  return burst === 0 || rate === 0 ? false : { capacity: Math.max(1, Math.floor(burst)), refillPerSecond: rate }
}
