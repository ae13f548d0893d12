import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { networkInterfaces, tmpdir } from 'node:os'
import { join } from 'node:path'
import type { LocalRuntimeOptions } from '../../src/runtime/local-runtime.js'
import { packageRoot } from '../../src/runtime/layout.js'
import { localRuntime, type LocalRuntimeUnderTest } from './drivers.js'

/** Whether bubblewrap can sandbox on this machine, decided once by the driver's own trial run. */
export async function bwrapAvailable(): Promise<boolean> {
  const scratch = await mkdtemp(join(tmpdir(), 'corral-rt-check-'))
  try {
    const check = await localRuntime({ root: scratch, proxy: { host: '127.0.0.1', port: 1 }, warn: () => {} }).check()
    // CI installs bubblewrap and sets CORRAL_TEST_REQUIRE_BWRAP=1: there a missing sandbox is a
    // failure, never a silent skip of the isolation suites.
    if (!check.ok && process.env.CORRAL_TEST_REQUIRE_BWRAP === '1') {
      throw new Error(`bubblewrap is required (CORRAL_TEST_REQUIRE_BWRAP=1) but unusable: ${check.problems.join('; ')}`)
    }
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

/** A bubblewrap runtime whose workspaces reach a proxy harness (its CA trusted), rooted under the package's .corral. */
export async function runtimeBehind(h: { proxyUrl: string; proxy: { ca: { certPem: string } } }, prefix: string, options: Partial<LocalRuntimeOptions> = {}): Promise<{ runtime: LocalRuntimeUnderTest; root: string; options: LocalRuntimeOptions; close(): Promise<void> }> {
  await mkdir(join(packageRoot(), '.corral'), { recursive: true })
  const root = await mkdtemp(join(packageRoot(), '.corral', prefix))
  await writeFile(join(root, 'corral-ca.pem'), h.proxy.ca.certPem)
  const all: LocalRuntimeOptions = { root, proxy: { host: '127.0.0.1', port: Number(new URL(h.proxyUrl).port) }, caCertPath: join(root, 'corral-ca.pem'), stopGraceMs: 1000, warn: () => {}, ...options }
  const runtime = localRuntime(all)
  return { runtime, root, options: all, close: async () => { await runtime.close(); await rm(root, { recursive: true, force: true }) } }
}
