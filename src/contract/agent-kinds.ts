// A role's agent kind (docs/roles.md "Agent kind", docs/agent.md "Agent kinds"): which program a
// workspace runs. `corral` is the reference agent (or the agent of an attached pack, as before the
// field existed); every other kind is a real agent CLI, run unmodified by an adapter inside the
// sandbox. Each CLI is a pinned npm package installed with corral (optional dependencies) and
// mounted read-only into the workspace; `AGENT_CLIS` says where its executable lies in it.

import { AGENT_KIND_PROVIDERS, AGENT_KINDS, type AgentKind } from './resources.js'

export { AGENT_KIND_PROVIDERS, AGENT_KINDS, type AgentKind }

/** The kinds that run a third-party CLI through an adapter. */
export type CliAgentKind = Exclude<AgentKind, 'corral'>
export const CLI_AGENT_KINDS = AGENT_KINDS.filter((k): k is CliAgentKind => k !== 'corral')

export function isCliAgentKind(kind: string | null | undefined): kind is CliAgentKind {
  return (CLI_AGENT_KINDS as readonly string[]).includes(kind ?? '')
}


export interface AgentCliPackage {
  /** The npm package whose directory is mounted (its version is pinned in corral's package.json). */
  package: string
  /** The executable, relative to that directory. */
  entry: string
  /** `node`: a JavaScript entry run with corral's own node; `native`: executed directly. */
  run: 'native' | 'node'
}

/**
 * Where each CLI is found among corral's dependencies (linux x64 builds; the platform packages are
 * what the wrapper packages' own launchers would exec, so running them directly skips a node hop).
 */
export const AGENT_CLIS: Readonly<Record<CliAgentKind, AgentCliPackage>> = {
  'claude-code': { package: '@anthropic-ai/claude-code-linux-x64', entry: 'claude', run: 'native' },
  codex: { package: '@openai/codex-linux-x64', entry: 'vendor/x86_64-unknown-linux-musl/bin/codex', run: 'native' },
  'gemini-cli': { package: '@google/gemini-cli', entry: 'bundle/gemini.js', run: 'node' },
  opencode: { package: 'opencode-linux-x64', entry: 'bin/opencode', run: 'native' },
}

/**
 * Where the runtime mounts the role's CLI package inside the sandbox (read-only); the adapter
 * finds the executable through CORRAL_AGENT_CLI, which the runtime sets.
 */
export const SANDBOX_AGENT_CLI_DIR = '/run/corral/agent-cli'
