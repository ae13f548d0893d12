import { mkdir, rm, symlink } from 'node:fs/promises'
import { join } from 'node:path'
import { DirectoryRuntime, type LaunchPlan, type SharedFiles } from './directory-runtime.js'
import { caEnv, proxyEnv } from './layout.js'
import type { AgentLaunch, PackMount, RuntimeCheck, RuntimeOptions } from './runtime.js'

export const NO_ISOLATION_WARNING =
  'WARNING: --runtime process runs every agent as a plain child process of corral serve, with its user, ' +
  'its files and its network. Nothing forces traffic through the policy proxy: an agent that ignores ' +
  'HTTPS_PROXY bypasses policy and audit. Use it only on a trusted development machine without bubblewrap.'

/**
 * The `process` driver: no sandbox. The agent runs on the host with /data being the workspace
 * directory's real path and the proxy variables pointing straight at the proxy. Same lifecycle,
 * snapshots and logs as `local`, so everything but isolation can be used where bwrap cannot run.
 */
export class ProcessRuntime extends DirectoryRuntime {
  readonly kind = 'process' as const
  readonly isolated = false
  protected readonly usesBridge = false

  constructor(options: RuntimeOptions) {
    super(options)
    this.warn(NO_ISOLATION_WARNING)
  }

  async check(): Promise<RuntimeCheck> {
    return { ok: true, problems: [], warnings: [NO_ISOLATION_WARNING] }
  }

  protected plan(workspaceId: string, launch: AgentLaunch, shared: SharedFiles, inbox: string): LaunchPlan {
    const { host, port } = this.options.proxy
    const proxyUrl = `http://${host.includes(':') ? `[${host}]` : host}:${port}`
    const dataDir = this.layout.data(workspaceId)
    const env: Record<string, string> = {
      ...launch.baseEnv,
      PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
      HOME: process.env.HOME ?? dataDir,
      LANG: process.env.LANG ?? 'C.UTF-8',
      ...proxyEnv(proxyUrl, launch.proxyToken),
      CORRAL_WORKSPACE_ID: workspaceId,
      CORRAL_WORKSPACE_DIR: dataDir,
      CORRAL_PROXY_URL: proxyUrl,
      CORRAL_INBOX: inbox,
      ...caEnv(shared.ca, shared.caBundle),
      ...launch.env,
      ...(launch.cli ? { CORRAL_AGENT_CLI: join(launch.cli.dir, launch.cli.entry), CORRAL_AGENT_CLI_RUN: launch.cli.run } : {}),
      CORRAL_PROXY_TOKEN: launch.proxyToken,
      CORRAL_STOP_GRACE_MS: String(this.options.stopGraceMs ?? 5000),
    }
    return { file: process.execPath, args: [shared.init, ...launch.command], env, cwd: dataDir }
  }

  /**
   * No mount namespace here: `<workspace>/packs/<name>` are symbolic links to the content trees,
   * renewed at every start so a role's changed packs apply to its next agent. Nothing stops this
   * agent from writing elsewhere either; the trees themselves are read-only files.
   */
  protected async mountPacks(workspaceId: string, packs: readonly PackMount[]): Promise<string> {
    const dir = join(this.layout.workspace(workspaceId), 'packs')
    await rm(dir, { recursive: true, force: true })
    await mkdir(dir, { recursive: true })
    for (const p of packs) await symlink(p.dir, join(dir, p.name), 'dir')
    return dir
  }
}
