// Resource limits per workspace (docs/runtime.md "Resource limits"). They are applied as rlimits
// by util-linux `prlimit`, run inside the sandbox as the first command, so they bind the init, the
// agent and everything the agent starts, and nothing outside. Why rlimits and not cgroups: a
// per-workspace cgroup needs a delegated cgroup v2 subtree with the memory, pids and cpu
// controllers, which hosts like our CI (cgroup v1, v2 holding only hugetlb) do not offer.
//
// Measured choices (docs/runtime.md):
// - memory is RLIMIT_DATA (private writable memory), not RLIMIT_AS: V8 reserves ~10 GB of address
//   space for every WebAssembly memory (undici's HTTP parser is one), so node's fetch fails under
//   any RLIMIT_AS below that, while it runs in 96 MB of RLIMIT_DATA.
// - pids is RLIMIT_NPROC set inside the sandbox's user namespace, where it counts that sandbox's
//   processes only. The kernel exempts processes of host root from it: when corral runs as root
//   (the sandbox uid maps to root) it is not enforced, which the start-up check finds by trying.
import { execFile } from 'node:child_process'
import { access, constants } from 'node:fs/promises'
import { promisify } from 'node:util'

const run = promisify(execFile)

export interface WorkspaceLimits {
  /** Private writable memory per process (RLIMIT_DATA), MiB. 0 = no limit. */
  memoryMb: number
  /** Processes and threads of the sandbox together (RLIMIT_NPROC in its user namespace). 0 = no limit. */
  pids: number
  /** CPUs' worth of time. Needs cgroups: reported as not applied when set. 0 = no limit. */
  cpus: number
  /** /data's allocated size (checked by the agent) and the largest file (RLIMIT_FSIZE), MiB. 0 = no limit. */
  diskMb: number
  /** Open file descriptors per process (RLIMIT_NOFILE). 0 = leave as inherited. */
  openFiles: number
}

export const DEFAULT_LIMITS: Readonly<WorkspaceLimits> = Object.freeze({ memoryMb: 2048, pids: 1024, cpus: 0, diskMb: 10240, openFiles: 4096 })

/** The server-wide settings, one environment variable each. */
export const LIMIT_ENV: Readonly<Record<keyof WorkspaceLimits, string>> = Object.freeze({
  memoryMb: 'CORRAL_WORKSPACE_MEMORY_MB',
  pids: 'CORRAL_WORKSPACE_PIDS',
  cpus: 'CORRAL_WORKSPACE_CPUS',
  diskMb: 'CORRAL_WORKSPACE_DISK_MB',
  openFiles: 'CORRAL_WORKSPACE_NOFILE',
})

export class LimitsConfigError extends Error {}

/**
 * Reads the limits; unset or empty means the default, `0` means none. Every bad value is named
 * at once (a whole number for all but CPUs, which may be fractional, e.g. 0.5).
 */
export function limitsFromEnv(env: NodeJS.ProcessEnv = process.env): WorkspaceLimits {
  const limits = { ...DEFAULT_LIMITS }
  const problems: string[] = []
  for (const key of Object.keys(LIMIT_ENV) as Array<keyof WorkspaceLimits>) {
    const name = LIMIT_ENV[key]
    const raw = env[name]?.trim()
    if (raw === undefined || raw === '') continue
    const n = Number(raw)
    const whole = key !== 'cpus'
    if (!Number.isFinite(n) || n < 0 || (whole && !Number.isInteger(n))) {
      problems.push(`${name} must be ${whole ? 'a whole number' : 'a number'} ≥ 0 (0 = no limit), got ${JSON.stringify(raw)}`)
      continue
    }
    limits[key] = n
  }
  if (problems.length > 0) throw new LimitsConfigError(problems.join('; '))
  return limits
}

const MIB = 1024 * 1024

/** `prlimit` options for the limits that are set (soft and hard alike, so the agent cannot raise them). */
export function prlimitArgs(limits: WorkspaceLimits): string[] {
  const args: string[] = []
  if (limits.memoryMb > 0) args.push(`--data=${limits.memoryMb * MIB}`)
  if (limits.pids > 0) args.push(`--nproc=${limits.pids}`)
  if (limits.diskMb > 0) args.push(`--fsize=${limits.diskMb * MIB}`)
  if (limits.openFiles > 0) args.push(`--nofile=${limits.openFiles}`)
  return args
}

/** The command run in the sandbox: itself under `prlimit` when a limit is set. */
export function withLimits(prlimit: string | null, limits: WorkspaceLimits, command: readonly string[]): string[] {
  const args = prlimitArgs(limits)
  if (args.length === 0) return [...command]
  if (!prlimit) throw new Error('prlimit (util-linux) is needed to apply the workspace limits')
  return [prlimit, ...args, '--', ...command]
}

/** What the agent reads of the limits (the disk quota it checks after each command and task). */
export function limitsEnv(limits: WorkspaceLimits): Record<string, string> {
  return limits.diskMb > 0 ? { [LIMIT_ENV.diskMb]: String(limits.diskMb) } : {}
}

/** Bound read-only in every sandbox through /usr or /bin, so the same path works inside. */
const PRLIMIT_PATHS = ['/usr/bin/prlimit', '/bin/prlimit', '/usr/sbin/prlimit', '/usr/local/bin/prlimit']

export async function findPrlimit(): Promise<string | null> {
  for (const path of PRLIMIT_PATHS) {
    if (await access(path, constants.X_OK).then(() => true, () => false)) return path
  }
  return null
}

/**
 * The shell script of the start-up trial, run in a sandbox under the configured limits: node must
 * start there (with a WebAssembly memory, as fetch needs), then whether a process limit is enforced
 * at all (with one process allowed, the inner shell cannot fork).
 */
export function limitsProbeScript(prlimit: string, node: string): string {
  return [
    // Too little memory makes node hang at start rather than fail: hence the time limit.
    'T=; command -v timeout >/dev/null && T="timeout 10"',
    `$T '${node}' -e 'new WebAssembly.Memory({ initial: 1 })' >/dev/null 2>&1 || echo node=failed`,
    `if ${prlimit} --nproc=1 -- /bin/sh -c '/bin/true & wait' 2>/dev/null; then echo nproc=ignored; else echo nproc=enforced; fi`,
  ].join('\n')
}

export interface LimitsCheck {
  problems: string[]
  warnings: string[]
}

/**
 * Runs the probe through `sandbox` (which starts the given command exactly as a workspace's agent
 * would be started) and says plainly which limits cannot be applied here.
 */
export async function checkLimits(limits: WorkspaceLimits, prlimit: string | null, node: string,
  sandbox: (command: string[]) => Promise<string>): Promise<LimitsCheck> {
  const problems: string[] = []
  const warnings: string[] = []
  if (limits.cpus > 0) {
    warnings.push(`${LIMIT_ENV.cpus}=${limits.cpus} is not applied: a CPU limit needs a per-workspace cgroup, which this version of corral does not create (see docs/runtime.md "Resource limits")`)
  }
  const needed = prlimitArgs(limits)
  if (needed.length === 0) return { problems, warnings }
  if (!prlimit) {
    problems.push(`prlimit (util-linux) is not installed, so the workspace limits cannot be applied: install util-linux, or set ${LIMIT_ENV.memoryMb}, ${LIMIT_ENV.pids}, ${LIMIT_ENV.diskMb} and ${LIMIT_ENV.openFiles} to 0 to run without them`)
    return { problems, warnings }
  }
  let out: string
  try {
    out = await sandbox(withLimits(prlimit, limits, ['/bin/sh', '-c', limitsProbeScript(prlimit, node)]))
  } catch (err) {
    const stderr = String((err as { stderr?: string }).stderr ?? (err as Error).message).trim()
    problems.push(`a sandbox under the workspace limits (${needed.join(' ')}) does not start: ${stderr}`)
    return { problems, warnings }
  }
  if (out.includes('node=failed')) {
    problems.push(`node does not start under the workspace limits (${needed.join(' ')}): raise ${LIMIT_ENV.memoryMb} (node needs about 64 MB to start, the reference agent about 100 MB) or ${LIMIT_ENV.openFiles}`)
  }
  if (limits.pids > 0 && out.includes('nproc=ignored')) {
    warnings.push(`${LIMIT_ENV.pids}=${limits.pids} is not enforced: the kernel exempts processes of host root from the process limit, and corral serve runs as root (the sandbox's user maps to it); run corral serve as an unprivileged user to enforce it`)
  }
  return { problems, warnings }
}

/** `execFile` for the probe, returning stdout. */
export async function runForOutput(file: string, args: readonly string[], env: Record<string, string>): Promise<string> {
  return (await run(file, [...args], { env, timeout: 20_000 })).stdout
}
