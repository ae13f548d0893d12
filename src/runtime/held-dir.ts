// File operations serve performs inside a workspace's /data, which the agent controls: any name
// there may be a symbolic link (to a host directory or file, dangling), a hardlink, or be swapped
// for one while serve works (docs/security.md "No host write follows a workspace link").
//
// Node has no openat(2), so every step here goes through `/proc/self/fd/<fd>/<name>`: the kernel
// resolves `/proc/self/fd/<fd>` to the directory that the descriptor holds (not to a path that
// could have been replaced since), and then `<name>` — a single component, never `..` or with a
// slash — inside it, like openat(fd, name). The last component is opened with O_NOFOLLOW (and
// O_DIRECTORY for directories), created with O_EXCL, or removed with unlink/rmdir, none of which
// follows a link. So there is no check-then-use gap: what is checked is the descriptor itself.
// Linux only, like the sandbox.
import { constants } from 'node:fs'
import { type FileHandle, lchown, lstat, mkdir, open, readdir, rmdir, unlink } from 'node:fs/promises'
import { RuntimeError } from './errors.js'

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW
const NEW_FILE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW

/** Who owns what serve places in a workspace: the sandbox's host uid/gid (when serve runs as root). */
export interface Owner {
  uid: number
  gid: number
}

/** A name that is one path component of a directory, nothing that climbs or descends. */
function component(name: string): string {
  if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) {
    throw new RuntimeError('unsafe_path', `invalid path component ${JSON.stringify(name)}`)
  }
  return name
}

function refused(where: string, err: unknown): RuntimeError {
  const code = (err as NodeJS.ErrnoException).code
  const why = code === 'ELOOP' || code === 'ENOTDIR' ? 'is a link or not a directory' : code === 'EEXIST' ? 'already exists' : `cannot be used (${code ?? String(err)})`
  return new RuntimeError('unsafe_path', `${where} ${why}; serve never follows links that a workspace made`, { path: where })
}

/** A directory held by a descriptor; all operations are relative to it. */
export class HeldDir {
  readonly #handle: FileHandle
  /** For messages only: where this directory is, as the workspace sees it (e.g. `/data/uploads`). */
  readonly label: string

  private constructor(handle: FileHandle, label: string) {
    this.#handle = handle
    this.label = label
  }

  /**
   * Opens a directory serve itself made (a workspace's /data): its parents are serve's own, the
   * last component must not be a link.
   */
  static async open(path: string, label = path): Promise<HeldDir> {
    try {
      return new HeldDir(await open(path, DIR_FLAGS), label)
    } catch (err) {
      throw refused(label, err)
    }
  }

  /** The kernel path of `name` inside this directory (resolved through the descriptor). */
  at(name: string): string {
    return `/proc/self/fd/${this.#handle.fd}/${component(name)}`
  }

  #label(name: string): string {
    return `${this.label.replace(/\/$/, '')}/${name}`
  }

  /** Opens the sub-directory `name`, creating it (owned by `owner`) when absent. A link there is refused. */
  async dir(name: string, opts: { create?: boolean; mode?: number; owner?: Owner | null } = {}): Promise<HeldDir> {
    const path = this.at(name)
    if (opts.create) {
      try {
        await mkdir(path, { mode: opts.mode ?? 0o755 })
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw refused(this.#label(name), err)
      }
    }
    let handle: FileHandle
    try {
      handle = await open(path, DIR_FLAGS)
    } catch (err) {
      throw refused(this.#label(name), err)
    }
    if (opts.owner) await handle.chown(opts.owner.uid, opts.owner.gid)
    return new HeldDir(handle, this.#label(name))
  }

  /** Creates the new file `name` (never an existing one, never through a link). */
  async createFile(name: string, mode = 0o644, owner?: Owner | null): Promise<FileHandle> {
    let handle: FileHandle
    try {
      handle = await open(this.at(name), NEW_FILE_FLAGS, mode)
    } catch (err) {
      throw refused(this.#label(name), err)
    }
    if (owner) await handle.chown(owner.uid, owner.gid)
    return handle
  }

  async names(): Promise<string[]> {
    return readdir(`/proc/self/fd/${this.#handle.fd}`)
  }

  /**
   * Removes `name` and, for a directory, everything below it: directories are entered by
   * descriptor, links and files are unlinked, never followed.
   */
  async remove(name: string): Promise<void> {
    let st
    try {
      st = await lstat(this.at(name))
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return
      throw err
    }
    if (!st.isDirectory()) {
      await unlink(this.at(name)).catch(ignoreMissing)
      return
    }
    let sub: HeldDir
    try {
      sub = await this.dir(name)
    } catch {
      // Swapped for a link or file since the lstat: unlink whatever it is now.
      await unlink(this.at(name)).catch(ignoreMissing)
      return
    }
    try {
      for (const child of await sub.names()) await sub.remove(child)
    } finally {
      await sub.close()
    }
    await rmdir(this.at(name)).catch(ignoreMissing)
  }

  /** Gives everything below this directory (and it) to `owner`, without following a link. */
  async chownTree(owner: Owner): Promise<void> {
    await this.#handle.chown(owner.uid, owner.gid)
    for (const name of await this.names()) {
      const path = this.at(name)
      const st = await lstat(path).catch(() => null)
      if (!st) continue
      if (st.isDirectory()) {
        const sub = await this.dir(name).catch(() => null)
        if (!sub) continue
        try {
          await sub.chownTree(owner)
        } finally {
          await sub.close()
        }
      } else {
        // lchown, also for files: one swapped for a link since the lstat changes only the link.
        await lchown(path, owner.uid, owner.gid).catch(() => {})
      }
    }
  }

  async close(): Promise<void> {
    await this.#handle.close().catch(() => {})
  }
}

function ignoreMissing(err: unknown): void {
  if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
}

/** Walks `parts` below `root` (opening, or creating, each), then runs `fn` in the last one. */
export async function withDirPath<T>(root: HeldDir, parts: readonly string[], opts: { create?: boolean; owner?: Owner | null },
  fn: (dir: HeldDir) => Promise<T>): Promise<T> {
  const held: HeldDir[] = []
  try {
    let dir = root
    for (const part of parts) {
      dir = await dir.dir(part, opts)
      held.push(dir)
    }
    return await fn(dir)
  } finally {
    for (const d of held.reverse()) await d.close()
  }
}
