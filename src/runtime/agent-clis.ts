// Where the agent CLIs come from (docs/agent.md "Agent kinds"): each is a pinned npm package
// installed with corral (optional dependencies), found on the host once per start and mounted
// read-only into the workspace; nothing is downloaded per task. An install that left the optional
// dependencies out can name another node_modules folder holding them (CORRAL_AGENT_CLI_DIR).
import { existsSync, realpathSync } from 'node:fs'
import { join } from 'node:path'
import { AGENT_CLIS, type AgentCliPackage, type CliAgentKind } from '../contract/index.js'
import { RuntimeError } from './errors.js'
import { packageRoot } from './layout.js'

/** One CLI as a launch carries it: its package directory on the host and its executable in it. */
export interface AgentCliMount {
  kind: CliAgentKind
  /** Host path of the CLI's package directory (bound read-only at SANDBOX_AGENT_CLI_DIR). */
  dir: string
  /** The executable, relative to `dir`. */
  entry: string
  /** `node`: run with corral's node; `native`: executed directly. */
  run: AgentCliPackage['run']
}

/**
 * The CLI of `kind`, searched in `extraModules` (node_modules folders, first wins) and then in
 * corral's own node_modules. A CLI that is not installed is a clear error naming the package.
 */
export function locateAgentCli(kind: CliAgentKind, extraModules: readonly string[] = []): AgentCliMount {
  const cli = AGENT_CLIS[kind]
  const searched = [...extraModules, join(packageRoot(), 'node_modules')]
  for (const modules of searched) {
    const dir = join(modules, cli.package)
    if (!existsSync(join(dir, cli.entry))) continue
    return { kind, dir: realpathSync(dir), entry: cli.entry, run: cli.run }
  }
  throw new RuntimeError('runtime_unavailable',
    `the ${kind} agent is not installed: ${cli.package}/${cli.entry} is not in ${searched.join(' or ')}; install corral with its optional dependencies (npm ci without --omit=optional) or set CORRAL_AGENT_CLI_DIR to a node_modules folder that holds it`)
}

/** The node_modules folders named by CORRAL_AGENT_CLI_DIR (colon-separated), searched before corral's own. */
export function agentCliDirsFromEnv(env: NodeJS.ProcessEnv = process.env): string[] {
  return (env.CORRAL_AGENT_CLI_DIR ?? '').split(':').filter((d) => d !== '')
}
