// Resource limits per workspace (docs/runtime.md "Resource limits"). Memory (the whole workspace,
// its /tmp included) and processes are enforced by a per-workspace cgroup (cgroups.ts, v2 or v1);
// open files, the largest file and a per-process memory bound are rlimits applied by util-linux
// `prlimit`, run inside the sandbox, so they bind the init, the agent and everything it starts.
// A configured limit that cannot be enforced here refuses serve's start (checkLimits `unenforced`)
// unless the operator opts out (--allow-unenforced-limits / CORRAL_ALLOW_UNENFORCED_LIMITS=1).
//
// Measured choices (docs/runtime.md):
// - memory is RLIMIT_DATA (private writable memory), not RLIMIT_AS: V8 reserves ~10 GB of address
//   space for every WebAssembly memory (undici's HTTP parser is one), so node's fetch fails under
//   any RLIMIT_AS below that, while it runs in 96 MB of RLIMIT_DATA.
// - without cgroups (an unprivileged serve with no delegated cgroup), pids falls back to RLIMIT_NPROC
//   inside the sandbox's user namespace, where it counts that sandbox's processes only; the
//   start-up check tries it. With cgroups it is not set: as root a per-uid count would be shared by
//   every workspace given no uid of its own (they run as the driver's one uid).
import { execFile } from 'node:child_process'
import { access, constants } from 'node:fs/promises'
import { promisify } from 'node:util'

const run = promisify(execFile)

export interface WorkspaceLimits {
  /** Private writable memory per process (RLIMIT_DATA), MiB. 0 = no limit. */
  memoryMb: number
  /** Processes and threads of the sandbox together (RLIMIT_NPROC in its user namespace). 0 = no limit. */
  pids: number
  /** CPUs' worth of time, through the workspace's cgroup (cpu controller). 0 = no limit. */
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

/**
 * `prlimit` options for the limits that are set (soft and hard alike, so the agent cannot raise
 * them). `nproc` false when a cgroup counts the processes instead; `fsize` false when the kernel
 * holds the disk quota itself (data-image.ts): what counts is then what a file allocates, and a
 * sparse file's size is no limit of its own.
 */
export function prlimitArgs(limits: WorkspaceLimits, opts: LimitOptions = {}): string[] {
  const args: string[] = []
  if (limits.memoryMb > 0) args.push(`--data=${limits.memoryMb * MIB}`)
  if (limits.pids > 0 && opts.nproc !== false) args.push(`--nproc=${limits.pids}`)
  if (limits.diskMb > 0 && opts.fsize !== false) args.push(`--fsize=${limits.diskMb * MIB}`)
  if (limits.openFiles > 0) args.push(`--nofile=${limits.openFiles}`)
  return args
}

export interface LimitOptions {
  nproc?: boolean
  fsize?: boolean
}

/** The command run in the sandbox: itself under `prlimit` when a limit is set. */
export function withLimits(prlimit: string | null, limits: WorkspaceLimits, command: readonly string[], opts: LimitOptions = {}): string[] {
  const args = prlimitArgs(limits, opts)
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
 * start there (with a WebAssembly memory, as fetch needs). With `nprocProbe`, whether RLIMIT_NPROC
 * binds at all (with one process allowed, the inner shell cannot fork).
 */
export function limitsProbeScript(prlimit: string, node: string, opts: { nprocProbe?: boolean } = { nprocProbe: true }): string {
  return [
    // Too little memory makes node hang at start rather than fail: hence the time limit.
    'T=; command -v timeout >/dev/null && T="timeout 10"',
    `$T '${node}' -e 'new WebAssembly.Memory({ initial: 1 })' >/dev/null 2>&1 || echo node=failed`,
    ...(opts.nprocProbe !== false
      ? [`if ${prlimit} --nproc=1 -- /bin/sh -c '/bin/true & wait' 2>/dev/null; then echo nproc=ignored; else echo nproc=enforced; fi`]
      : []),
  ].join('\n')
}

/** Run in a sandbox whose cgroup allows PIDS_PROBE_MAX tasks: eight background sleeps cannot all start. */
export const PIDS_PROBE_MAX = 6
export const PIDS_PROBE_SCRIPT = "if /bin/sh -c 'for i in 1 2 3 4 5 6 7 8; do sleep 1 & done; wait' 2>/dev/null; then echo pids=ignored; else echo pids=enforced; fi"

/** Whether the whole-workspace limits can be enforced here (cgroups) and how the agent runs. */
export interface Enforcement {
  /** A per-workspace cgroup is made for each agent (memory and pids). */
  cgroups: boolean
  /** …and it can limit CPU time. */
  cpu?: boolean
  /** Why there are no cgroups (cgroups.ts detection), for the message. */
  cgroupReason?: string
  /** serve runs as root (the agent is dropped to an unprivileged uid). */
  root: boolean
}

export interface LimitsCheck {
  problems: string[]
  warnings: string[]
  /** Configured limits this host cannot enforce: serve refuses to start over them unless opted out. */
  unenforced: string[]
}

/** The opt-out's names, for messages. */
export const ALLOW_UNENFORCED = '--allow-unenforced-limits (CORRAL_ALLOW_UNENFORCED_LIMITS=1)'

/**
 * Runs the probes through `sandbox` (which starts the given command exactly as a workspace's agent
 * would be started, in a cgroup with the given limits when there are cgroups) and says plainly
 * which limits cannot be applied.
 */
export async function checkLimits(limits: WorkspaceLimits, prlimit: string | null, node: string,
  sandbox: (command: string[], cgroup?: { memoryBytes: number; pids: number; cpus?: number }) => Promise<string>, enforcement: Enforcement): Promise<LimitsCheck> {
  const problems: string[] = []
  const warnings: string[] = []
  const unenforced: string[] = []
  const why = enforcement.cgroupReason ? ` (${enforcement.cgroupReason})` : ''
  if (limits.cpus > 0 && !(enforcement.cgroups && enforcement.cpu)) {
    unenforced.push(`${LIMIT_ENV.cpus}=${limits.cpus} cannot be enforced: no per-workspace cgroup with the cpu controller can be made here${why}`)
  }
  if (limits.memoryMb > 0 && !enforcement.cgroups) {
    unenforced.push(`${LIMIT_ENV.memoryMb}=${limits.memoryMb} cannot be enforced for the whole workspace: no per-workspace memory cgroup can be made here${why}`)
  }
  // As root without cgroups, workspaces given no uid of their own share the driver's: RLIMIT_NPROC
  // would count them all together, one workspace's fork bomb starving the others.
  const sharedUid = enforcement.root && !enforcement.cgroups && limits.pids > 0
  if (sharedUid) unenforced.push(`${LIMIT_ENV.pids}=${limits.pids} cannot be enforced per workspace: no per-workspace pids cgroup can be made here${why}, and as root the workspaces given no uid of their own all run as the same uid`)
  const nproc = !enforcement.cgroups
  const needed = prlimitArgs(limits, { nproc })
  if (needed.length > 0 && !prlimit) {
    problems.push(`prlimit (util-linux) is not installed, so the workspace limits cannot be applied: install util-linux, or set ${LIMIT_ENV.memoryMb}, ${LIMIT_ENV.pids}, ${LIMIT_ENV.diskMb} and ${LIMIT_ENV.openFiles} to 0 to run without them`)
    return { problems, warnings, unenforced }
  }
  const cgroup = enforcement.cgroups ? { memoryBytes: limits.memoryMb * MIB, pids: limits.pids, cpus: limits.cpus } : undefined
  let out: string
  try {
    const script = limitsProbeScript(prlimit ?? 'prlimit', node, { nprocProbe: nproc && limits.pids > 0 && !sharedUid })
    out = await sandbox(withLimits(prlimit, limits, ['/bin/sh', '-c', script], { nproc }), cgroup)
    if (enforcement.cgroups && limits.pids > 0) out += await sandbox(['/bin/sh', '-c', PIDS_PROBE_SCRIPT], { memoryBytes: 0, pids: PIDS_PROBE_MAX })
  } catch (err) {
    const stderr = String((err as { stderr?: string }).stderr ?? (err as Error).message).trim()
    problems.push(`a sandbox under the workspace limits (${needed.join(' ')}) does not start: ${stderr}`)
    return { problems, warnings, unenforced }
  }
  if (out.includes('node=failed')) {
    problems.push(`node does not start under the workspace limits (${needed.join(' ')}): raise ${LIMIT_ENV.memoryMb} (node needs about 64 MB to start, the reference agent about 100 MB) or ${LIMIT_ENV.openFiles}`)
  }
  if (limits.pids > 0 && !sharedUid && (out.includes('nproc=ignored') || out.includes('pids=ignored') || !/(nproc|pids)=enforced/.test(out))) {
    unenforced.push(enforcement.cgroups
      ? `${LIMIT_ENV.pids}=${limits.pids} is not enforced: a workspace's pids cgroup did not stop its processes`
      : `${LIMIT_ENV.pids}=${limits.pids} is not enforced: no per-workspace pids cgroup can be made here${why}, and the kernel ignores the process rlimit for this sandbox`)
  }
  return { problems, warnings, unenforced }
}

/** `execFile` for the probe, returning stdout. */
export async function runForOutput(file: string, args: readonly string[], env: Record<string, string>): Promise<string> {
  return (await run(file, [...args], { env, timeout: 20_000 })).stdout
}
