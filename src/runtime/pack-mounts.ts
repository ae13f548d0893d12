// Packs inside a workspace (docs/runtime.md "Packs"): where the content trees appear, the
// variables that tell an agent about them, and how a pack's agent command is resolved against its
// own directory. Shared by both drivers so the contract an agent sees is the same in each; only
// the parent directory differs (/packs in the sandbox, a per-workspace link farm in process mode).
import { posix } from 'node:path'
import { RuntimeError } from './errors.js'
import type { AgentLaunch, PackMount } from './runtime.js'

/** Pack names are role-style names; anything else could escape the packs directory. */
const PACK_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/i

/** Refuses mounts that are not plain names or that repeat a name (two packs, one directory). */
export function checkPackMounts(packs: readonly PackMount[]): void {
  const seen = new Set<string>()
  for (const p of packs) {
    if (!PACK_NAME.test(p.name)) throw new RuntimeError('runtime_unavailable', `invalid pack name ${JSON.stringify(p.name)}`)
    if (seen.has(p.name)) throw new RuntimeError('runtime_unavailable', `pack ${p.name} is mounted twice`)
    seen.add(p.name)
  }
}

/**
 * The argv with the command pack's paths resolved against `packDir` (the pack's directory as the
 * agent sees it): a relative command[0] containing a slash, and arguments starting with `./`.
 */
export function resolvePackCommand(command: readonly string[], packDir: string): string[] {
  return command.map((arg, i) => {
    if (arg.startsWith('./')) return posix.join(packDir, arg)
    if (i === 0 && arg.includes('/') && !arg.startsWith('/')) return posix.join(packDir, arg)
    return arg
  })
}

/** The argv and the pack variables of one launch, given the packs' parent directory. */
export function packLaunch(launch: AgentLaunch, packsDir: string): { command: readonly string[]; env: Record<string, string> } {
  const packs = launch.packs ?? []
  checkPackMounts(packs)
  const env: Record<string, string> = { CORRAL_PACKS: packs.map((p) => p.name).join(','), CORRAL_PACKS_DIR: packsDir }
  if (launch.commandPack === undefined) return { command: launch.command, env }
  if (!packs.some((p) => p.name === launch.commandPack)) {
    throw new RuntimeError('runtime_unavailable', `the agent's pack ${launch.commandPack} is not mounted`)
  }
  const packDir = posix.join(packsDir, launch.commandPack)
  env.CORRAL_PACK_DIR = packDir
  return { command: resolvePackCommand(launch.command, packDir), env }
}
