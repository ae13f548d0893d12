// The local drivers' WorkspaceVolume: /data is a directory on serve's host. Measured with du
// (disk-usage.ts), or from statfs when it is a filesystem of its own (data-image.ts); host files are placed in it by descriptor (held-dir.ts), never through a link
// the workspace made.
import { open } from 'node:fs/promises'
import { join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { measureDisk, type DiskUsage, type MeasureOptions } from './disk-usage.js'
import { HeldDir, type Owner, withDirPath } from './held-dir.js'
import type { WorkspaceVolume } from './runtime.js'

/** A volume that is a filesystem of its own (data-image.ts). */
export interface KernelQuota {
  /** Mounts it when it is not (after a restart). */
  ready(): Promise<void>
  usage(): Promise<DiskUsage>
}

export class HostVolume implements WorkspaceVolume {
  readonly workspaceId: string
  /** The host directory that is /data inside the workspace. */
  readonly hostDir: string
  /** The host user that owns /data when it is not serve's own (serve runs as root); null otherwise. */
  readonly owner: Owner | null

  /** /data as an image of its own: mounted on demand, measured by the kernel. */
  readonly #kernel: KernelQuota | undefined

  constructor(workspaceId: string, hostDir: string, owner: Owner | null, kernel?: KernelQuota) {
    this.workspaceId = workspaceId
    this.hostDir = hostDir
    this.owner = owner
    this.#kernel = kernel
  }

  async usage(options?: MeasureOptions): Promise<DiskUsage> {
    if (!this.#kernel) return measureDisk(this.hostDir, options)
    await this.#kernel.ready()
    return this.#kernel.usage()
  }

  async placeFiles(into: readonly string[], from: string, names: readonly string[]): Promise<void> {
    await this.#kernel?.ready()
    const owner = this.owner
    const root = await HeldDir.open(this.hostDir, '/data')
    try {
      await withDirPath(root, into, { create: true, owner }, async (dir) => {
        for (const name of names) {
          const out = await dir.createFile(name, 0o644, owner)
          const src = await open(join(from, name), 'r')
          try {
            await pipeline(src.createReadStream(), out.createWriteStream())
          } finally {
            await src.close().catch(() => {})
            await out.close().catch(() => {})
          }
        }
      })
    } finally {
      await root.close()
    }
  }
}
