// The disk quota in the kernel (docs/runtime.md "Disk quota"): as root, each workspace's /data is
// an ext4 filesystem of its own, in a sparse image file next to it, loop-mounted at its data dir.
// A write past the image's free space fails with ENOSPC in the agent, whatever it writes and however
// fast: the quota no longer depends on a scan catching up. The image holds what the quota allows
// and no more: it is sized so that the space free right after mkfs is the quota (the filesystem's
// own metadata comes on top), and its usage is read from statfs, not by walking the tree.
//
// The image file persists with the workspace; the mount is made when the workspace is provisioned
// or re-adopted and taken down when it is removed or serve closes (a serve killed with -9 leaves it,
// the next one adopts it). Forks restore into a new image of the quota's size: a snapshot larger
// than the quota does not fit and the fork fails.
import { execFile } from 'node:child_process'
import { chmod, chown, mkdir, readFile, rm, rmdir, statfs, truncate, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'
import type { DiskUsage } from './disk-usage.js'
import type { Owner } from './held-dir.js'

const run = promisify(execFile)
const MIB = 1024 * 1024
const BLOCK = 4096
/**
 * Free space under which an image counts as full (DiskUsage.full): a write the kernel refused
 * leaves less than this much behind (ext4 refuses a write that would not fit whole, with its
 * metadata), up to a quarter of a very small image.
 */
export const FULL_SLACK_BYTES = MIB
/** Inodes: one per 8 KiB of quota, so small files run out of blocks about when they run out of inodes. */
const BYTES_PER_INODE = 8192
const MOUNT_OPTIONS = 'loop,nosuid,nodev,noatime'
/**
 * Tries at a loop mount. Attaching a free loop device races with other processes attaching one at
 * the same moment (several serves starting on one host, their workspaces provisioning): mount can
 * pick a device another process is configuring and fail ("probably corrupted filesystem on
 * /dev/loopN"); a new try picks another device.
 */
const MOUNT_TRIES = 4
const TOOLS = ['mkfs.ext4', 'e2fsck', 'mount', 'umount', 'losetup']

interface ImageMeta {
  /** Bytes free right after mkfs: what the workspace may hold (the quota, give or take a block). */
  capacityBytes: number
}

/** Loop-mounts the ext4 image at `dir`, trying again after a failure (MOUNT_TRIES); the last failure is thrown. */
async function mountLoop(image: string, dir: string): Promise<void> {
  for (let tried = 1; ; tried++) {
    try {
      await run('mount', ['-t', 'ext4', '-o', MOUNT_OPTIONS, image, dir])
      return
    } catch (err) {
      if (tried >= MOUNT_TRIES) throw err
      // Apart in time from whoever took the device this try wanted.
      await new Promise((r) => setTimeout(r, 25 + Math.random() * 100 * tried))
    }
  }
}

/** The escape of a mount point in /proc/self/mountinfo (space, tab, newline, backslash as octal). */
function mountinfoPath(path: string): string {
  return path.replace(/[\\ \t\n]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`)
}

/** Whether `dir` is a mount point now (this process's mount namespace). */
export async function isMountPoint(dir: string): Promise<boolean> {
  const wanted = mountinfoPath(resolve(dir))
  const info = await readFile('/proc/self/mountinfo', 'utf8')
  return info.split('\n').some((line) => line.split(' ')[4] === wanted)
}

export class DataImages {
  readonly quotaBytes: number
  /** Mount points this driver mounted or adopted, with their image's capacity. */
  readonly #mounted = new Map<string, number>()

  constructor(quotaBytes: number) {
    this.quotaBytes = quotaBytes
  }

  /**
   * Why images cannot back /data here (not root, a tool or the loop driver missing), or undefined:
   * a small one is made, mounted, written past its size and taken down in `scratch`.
   */
  static async probe(scratch: string): Promise<string | undefined> {
    if (process.getuid?.() !== 0) return 'serve does not run as root (loop mounts need it)'
    for (const tool of TOOLS) {
      if (!(await run('sh', ['-c', `command -v ${tool}`], { env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } }).then(() => true, () => false))) {
        return `${tool} is not installed (e2fsprogs, util-linux)`
      }
    }
    const images = new DataImages(8 * MIB)
    const dir = join(scratch, 'probe')
    await mkdir(dir, { recursive: true })
    try {
      await images.create(join(scratch, 'probe.img'), dir, { uid: 0, gid: 0 })
      const wrote = await run('dd', ['if=/dev/zero', `of=${join(dir, 'fill')}`, 'bs=1M', 'count=16']).then(() => 'all', (e: { stderr?: string }) => e.stderr ?? '')
      if (!/No space left/.test(wrote)) return `a write past a probe image's size was not refused (${wrote.trim().split('\n')[0]})`
      return undefined
    } catch (err) {
      const why = String((err as { stderr?: string }).stderr ?? (err as Error).message).trim().split('\n')[0]
      return `a loop-mounted ext4 image cannot be made here (${why}); check losetup -f, /dev/loop-control and modprobe loop`
    } finally {
      await images.closeAll()
      await rm(join(scratch, 'probe.img'), { force: true })
    }
  }

  /**
   * Makes the image at `image` (replacing any) and mounts it at `dir`, its root owned by `owner`
   * (mode 0700) and empty. Sized up from the quota by the filesystem's overhead, never past it.
   */
  async create(image: string, dir: string, owner: Owner | null): Promise<void> {
    // What the workspace may fill: the quota less /data's own directory block, which du counts.
    const target = this.quotaBytes - BLOCK
    let size = this.quotaBytes
    let fitting: number | undefined
    for (let attempt = 0; attempt < 4; attempt++) {
      const free = await this.#format(image, size, dir)
      if (free > target) break
      fitting = size
      if (target - free < 4 * BLOCK) break
      size += Math.ceil((target - free) / BLOCK) * BLOCK
    }
    // The last size whose free space was within the quota (the first one always is).
    const free = await this.#format(image, fitting ?? this.quotaBytes, dir)
    await writeFile(`${image}.json`, JSON.stringify({ capacityBytes: free } satisfies ImageMeta))
    await this.mount(image, dir)
    if (owner) await chown(dir, owner.uid, owner.gid)
    await chmod(dir, owner ? 0o700 : 0o755)
  }

  /**
   * mkfs at `size` bytes, without the lost+found mkfs makes (the agent's /data holds only its own
   * files; e2fsck makes one again when it needs it); returns the space then free (mounted at `dir`
   * to ask statfs, then unmounted).
   */
  async #format(image: string, size: number, dir: string): Promise<number> {
    await this.unmount(dir)
    await rm(image, { force: true })
    await writeFile(image, '')
    await truncate(image, size)
    await run('mkfs.ext4', ['-q', '-F', '-m', '0', '-b', String(BLOCK), '-i', String(BYTES_PER_INODE),
      '-E', 'lazy_itable_init=1,lazy_journal_init=1', '-L', 'corral-data', image])
    await mountLoop(image, dir)
    try {
      await rmdir(join(dir, 'lost+found')).catch(() => {})
      const st = await statfs(dir)
      return st.bavail * st.bsize
    } finally {
      await run('umount', [dir])
    }
  }

  /** Mounts being made, per mount point: two callers at once (a snapshot, a usage check) mount once. */
  readonly #mounting = new Map<string, Promise<void>>()

  /** Mounts `image` at `dir` unless something is mounted there already (adopted as it is). */
  mount(image: string, dir: string): Promise<void> {
    const key = resolve(dir)
    const pending = this.#mounting.get(key)
    if (pending) return pending
    const made = this.#mount(image, dir).finally(() => this.#mounting.delete(key))
    this.#mounting.set(key, made)
    return made
  }

  async #mount(image: string, dir: string): Promise<void> {
    if (!(await isMountPoint(dir))) {
      // A serve that died mid-write left it unclean: replay the journal, fix what preen may fix.
      await run('e2fsck', ['-p', image]).catch((err: { code?: number }) => {
        if (typeof err.code !== 'number' || err.code > 1) throw err
      })
      await mountLoop(image, dir)
    }
    const meta = JSON.parse(await readFile(`${image}.json`, 'utf8').catch(() => '{}')) as Partial<ImageMeta>
    this.#mounted.set(resolve(dir), meta.capacityBytes ?? this.quotaBytes)
  }

  async unmount(dir: string): Promise<void> {
    this.#mounted.delete(resolve(dir))
    if (!(await isMountPoint(dir))) return
    // A process still inside (a snapshot's tar being killed) would make it busy: detach it then.
    await run('umount', [dir]).catch(() => run('umount', ['-l', dir]))
  }

  async closeAll(): Promise<void> {
    for (const dir of [...this.#mounted.keys()]) await this.unmount(dir).catch(() => {})
  }

  /**
   * The image's usage from statfs: its capacity less what is free (allocated blocks and inodes, a
   * sparse file's holes not counted, a hard-linked file once), and whether it is full.
   */
  async usage(dir: string): Promise<DiskUsage> {
    const st = await statfs(dir)
    const capacity = this.#mounted.get(resolve(dir)) ?? this.quotaBytes
    const free = st.bavail * st.bsize
    return { usedBytes: Math.max(0, capacity - free), full: free < Math.min(FULL_SLACK_BYTES, capacity / 4) || st.ffree === 0, kernel: true }
  }
}
