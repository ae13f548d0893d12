import { execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import { open } from 'node:fs/promises'
import { promisify } from 'node:util'
import { create as tarCreate, extract as tarExtract } from 'tar'
import type { Owner } from './held-dir.js'

const run = promisify(execFile)

/** Writes and unpacks the snapshot tars. Both implementations produce archives the other can read. */
export interface Archiver {
  readonly name: 'gnu-tar' | 'node-tar'
  /**
   * Archives `entries` (top-level names) of `dir` into `file`. With `owner` (serve runs as root),
   * tar runs as the workspace's user: it reads only what the agent itself could.
   */
  create(dir: string, entries: readonly string[], file: string, owner?: Owner | null): Promise<void>
  /**
   * Unpacks `file` into the existing `dir`, never restoring owners, never writing outside `dir`.
   * With `owner`, GNU tar runs as the workspace's user (the caller gives it `dir`).
   */
  extract(file: string, dir: string, owner?: Owner | null): Promise<void>
}

/** The `tar` package: pure JavaScript, always available. */
export const nodeTar: Archiver = {
  name: 'node-tar',
  async create(dir, entries, file) {
    // Not `portable`: that mode widens permissions (losing read-only bits) and drops directory mtimes.
    await tarCreate({ file, cwd: dir }, [...entries])
  },
  async extract(file, dir) {
    // Absolute paths and `..` are stripped by tar; preserveOwner false even when corral runs as root.
    await tarExtract({ file, cwd: dir, preserveOwner: false })
  },
}

/**
 * GNU tar, when the host has it: several times faster than the tar package on trees of many
 * files (docs/runtime.md has the figures), which is what keeps stop and fork of a large workspace within budget.
 * POSIX (pax) format so mtimes keep their sub-second part.
 */
export const gnuTar: Archiver = {
  name: 'gnu-tar',
  async create(dir, entries, file, owner) {
    if (owner) {
      const code = await tarAs(owner, dir, ['--create', '--file', '-', ...CREATE_OPTIONS, '--', ...entries], { out: file })
      if (code !== 0 && code !== 1) throw new Error(`tar --create failed (exit ${code})`)
      return
    }
    try {
      // --ignore-failed-read: a file the agent made unreadable (chmod 000, when serve is not root)
      // is left out with a warning instead of failing the whole stop.
      await run('tar', ['--create', '--file', file, '--format=posix', '--pax-option=delete=atime,delete=ctime', '--numeric-owner', '--ignore-failed-read', '--directory', dir, '--', ...entries], { maxBuffer: 16 * 1024 * 1024 })
    } catch (err) {
      // Exit 1 is "some files differ" (changed while read); the archive is complete and usable.
      if ((err as { code?: number }).code !== 1) throw new Error(`tar --create failed: ${String((err as { stderr?: string }).stderr ?? (err as Error).message).trim()}`)
    }
  },
  async extract(file, dir, owner) {
    if (owner) {
      const code = await tarAs(owner, dir, ['--extract', '--file', '-', ...EXTRACT_OPTIONS], { in: file })
      if (code !== 0) throw new Error(`tar --extract failed (exit ${code})`)
      return
    }
    try {
      // GNU tar refuses members with `..` and strips leading `/` by default; keep it that way.
      await run('tar', ['--extract', '--file', file, '--directory', dir, '--no-same-owner', '--preserve-permissions', '--delay-directory-restore'], { maxBuffer: 16 * 1024 * 1024 })
    } catch (err) {
      throw new Error(`tar --extract failed: ${String((err as { stderr?: string }).stderr ?? (err as Error).message).trim()}`)
    }
  },
}

const CREATE_OPTIONS = ['--format=posix', '--pax-option=delete=atime,delete=ctime', '--numeric-owner', '--ignore-failed-read']
const EXTRACT_OPTIONS = ['--no-same-owner', '--preserve-permissions', '--delay-directory-restore']

/**
 * GNU tar as `owner`, working in `cwd`: the child changes into `cwd` before it drops to the
 * owner's uid (libuv's order), so the owner needs no right to the host path leading there; the
 * archive travels through stdin or stdout, opened here.
 */
async function tarAs(owner: Owner, cwd: string, args: string[], io: { in?: string; out?: string }): Promise<number | null> {
  const handle = io.in ? await open(io.in, 'r') : await open(io.out!, 'wx', 0o600)
  try {
    const child = spawn('tar', args, {
      cwd, uid: owner.uid, gid: owner.gid, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C' },
      stdio: io.in ? [handle.fd, 'ignore', 'pipe'] : ['ignore', handle.fd, 'pipe'],
    })
    let stderr = ''
    child.stderr?.setEncoding('utf8').on('data', (d: string) => {
      if (stderr.length < 4000) stderr += d
    })
    const [code] = (await once(child, 'close')) as [number | null]
    if (code !== 0 && !(io.out && code === 1)) throw new Error(`tar ${args[0]} failed: ${stderr.trim() || `exit ${code}`}`)
    return code
  } finally {
    await handle.close()
  }
}

let detected: Promise<Archiver> | undefined

/** GNU tar if `tar --version` says so, else the tar package. CORRAL_SNAPSHOT_TAR=node forces the package. */
export function defaultArchiver(): Promise<Archiver> {
  detected ??= (async () => {
    if (process.env.CORRAL_SNAPSHOT_TAR === 'node') return nodeTar
    try {
      const { stdout } = await run('tar', ['--version'])
      return stdout.includes('GNU tar') ? gnuTar : nodeTar
    } catch {
      return nodeTar
    }
  })()
  return detected
}
