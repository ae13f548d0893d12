// Starting an agent in a workspace: the role's packs resolved at each start (a role or pack edit
// applies to the next agent), their content trees pinned while the agent runs, and the packs each
// running agent was started with remembered (their agent-event schemas apply to its events).
import { isCliAgentKind } from '../contract/index.js'
import { defaultAgentCommand, locateAgentCli, type AgentLaunch, type AgentProcess, type WorkspaceRuntime } from '../runtime/index.js'
import type { Logger } from 'pino'
import type { RoleConfig, WorkspaceLogs, WorkspaceRecord, WorkspacesRepository } from '../store/index.js'
import type { PackEventValidators } from './agent-event-schemas.js'
import { agentEnv, agentProgram } from './agent-launch.js'
import { logOffset, shipAgentLog } from './log-shipper.js'
import { resolveWorkspacePacks, type PackSource, type WorkspacePacks } from './packs.js'

export interface LauncherOptions {
  runtime: WorkspaceRuntime
  workspaces: WorkspacesRepository
  packs?: PackSource
  /** argv of the default agent (when no attached pack provides one). */
  agentCommand: readonly string[]
  /** node_modules folders searched for the agent CLIs before corral's own (CORRAL_AGENT_CLI_DIR). */
  agentCliDirs?: readonly string[]
  /** Extra environment for every agent. */
  agentEnv?: Record<string, string>
  /** Where each agent's own output is copied while it runs (log-shipper.ts); none when unset. */
  logs?: WorkspaceLogs
  logger?: Logger
}

export class AgentLauncher {
  readonly #o: LauncherOptions
  /** The packs each workspace's current agent was started with (its event schemas). */
  readonly #launchPacks = new Map<string, WorkspacePacks>()
  /** The agents whose output this process ships already (an agent is never shipped twice). */
  readonly #shipping = new WeakSet<AgentProcess>()

  constructor(options: LauncherOptions) {
    this.#o = options
  }

  /**
   * Starts the role's agent with `token` and the extra `launch` fields (the task inbox, the task
   * source), its packs' trees pinned until it exits: a re-upload or delete meanwhile does not
   * remove a tree the agent still reads (PackContent.removeIfUnused).
   */
  async start(ws: WorkspaceRecord, role: RoleConfig | undefined, token: string, extra: { env?: Record<string, string>; files?: AgentLaunch['files'] } = {}): Promise<AgentProcess> {
    const packs = await resolveWorkspacePacks(this.#o.packs, ws.org_id, role?.pack_ids ?? [])
    this.#launchPacks.set(ws.id, packs)
    const cli = isCliAgentKind(role?.agent_kind) ? locateAgentCli(role.agent_kind, this.#o.agentCliDirs) : undefined
    const launch: AgentLaunch = {
      // A CLI's adapter is the reference agent's own entry, whatever the default agent is.
      ...agentProgram(packs, cli ? defaultAgentCommand() : this.#o.agentCommand, cli),
      proxyToken: token,
      env: { ...(role ? agentEnv(role) : {}), ...this.#o.agentEnv, ...extra.env },
      ...(extra.files ? { files: extra.files } : {}),
      ...(role?.resources ? { resources: role.resources } : {}),
    }
    const pin = this.#o.packs?.pin
    const unpins = pin ? packs.digests.map((d) => pin(d)) : []
    const release = (): void => unpins.forEach((unpin) => unpin())
    try {
      const logs = this.#o.logs
      const from = logs ? await logOffset(this.#o.runtime.capabilities.hostLogs?.agentLogPath(ws.id) ?? '') : 0
      const proc = await this.#o.runtime.startAgent(ws.id, launch)
      void proc.exited.finally(release)
      if (logs) {
        this.#shipping.add(proc)
        void shipAgentLog({ logs, ...(this.#o.logger ? { logger: this.#o.logger } : {}) }, proc, from, token)
      }
      return proc
    } catch (err) {
      release()
      throw err
    }
  }

  /**
   * Ships the output of an agent this process did not start (adopted in a takeover) from now on:
   * only drivers that stream it (`proc.output`, Kubernetes) can; a host file stays on its host.
   */
  follow(proc: AgentProcess): void {
    const logs = this.#o.logs
    if (!logs || !proc.output || this.#shipping.has(proc)) return
    this.#shipping.add(proc)
    void shipAgentLog({ logs, ...(this.#o.logger ? { logger: this.#o.logger } : {}) }, proc, 0)
  }

  /**
   * The pack schemas a workspace's agent events must also satisfy: those its running agent was
   * started with; read from the role when no agent of this process started it (a restart).
   */
  async eventSchemas(orgId: string, workspaceId: string): Promise<readonly PackEventValidators[]> {
    const known = this.#launchPacks.get(workspaceId)
    if (known) return known.schemas
    const ws = await this.#o.workspaces.get(orgId, workspaceId)
    if (!ws) return []
    const role = await this.#o.workspaces.role(ws.org_id, { id: ws.role_id })
    return (await resolveWorkspacePacks(this.#o.packs, orgId, role?.pack_ids ?? [])).schemas
  }

  forget(workspaceId: string): void {
    this.#launchPacks.delete(workspaceId)
  }
}
