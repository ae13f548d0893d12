import { mkdtemp, rm } from 'node:fs/promises'
import { networkInterfaces, tmpdir } from 'node:os'
import { join } from 'node:path'
import { LocalRuntime } from '../../src/runtime/local-runtime.js'

/** Whether bubblewrap can sandbox on this machine, decided once by the driver's own trial run. */
export async function bwrapAvailable(): Promise<boolean> {
  const scratch = await mkdtemp(join(tmpdir(), 'corral-rt-check-'))
  try {
    const check = await new LocalRuntime({ root: scratch, proxy: { host: '127.0.0.1', port: 1 }, warn: () => {} }).check()
    if (!check.ok) console.log(`bubblewrap unavailable, skipping sandbox suites: ${check.problems.join('; ')}`)
    return check.ok
  } finally {
    await rm(scratch, { recursive: true, force: true })
  }
}

/** The host's first non-loopback IPv4 address, if any. */
export function hostAddress(): string | undefined {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address
  }
  return undefined
}
