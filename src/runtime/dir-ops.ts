// Small operations of the directory drivers on the host: removing what a workspace may have filled
// with links, and waiting for the init's first report.
import { once } from 'node:events'
import { access } from 'node:fs/promises'
import { createInterface } from 'node:readline'
import type { Readable } from 'node:stream'
import { HeldDir } from './held-dir.js'
import type { AgentExit } from './runtime.js'

/** Removes `name` in the directory `parent` (serve's own) without following any link below it. */
export async function removeIn(parent: string, name: string): Promise<void> {
  if (!(await exists(parent))) return
  const held = await HeldDir.open(parent)
  try {
    await held.remove(name)
  } finally {
    await held.close()
  }
}

export async function exists(path: string): Promise<boolean> {
  return access(path).then(() => true, () => false)
}

/** Waits for the init's `spawned <pid>` line on fd 3, or for it to fail or exit first. */
export async function waitForSpawn(status: Readable | null, exited: Promise<AgentExit>): Promise<{ ok: true } | { ok: false; reason: string }> {
  if (!status) {
    await exited
    return { ok: false, reason: 'the sandbox could not be started' }
  }
  const lines = createInterface({ input: status })
  const first = once(lines, 'line').then(([line]) => String(line))
  const result = await Promise.race([first, exited.then((e) => e)])
  lines.close()
  if (typeof result === 'string') {
    if (result.startsWith('spawned')) return { ok: true }
    return { ok: false, reason: result.replace(/^failed /, '') }
  }
  return { ok: false, reason: `sandbox exited before the agent started (code ${result.code}, signal ${result.signal})` }
}
