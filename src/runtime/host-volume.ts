// The local drivers' WorkspaceVolume: /data is a directory on serve's host. Measured with du
// (disk-usage.ts); host files are placed in it by descriptor (held-dir.ts), never through a link
// the workspace made.
import { open } from 'node:fs/promises'
import { join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { measureDisk, type DiskUsage, type MeasureOptions } from './disk-usage.js'
import { HeldDir, type Owner, withDirPath } from './held-dir.js'
import type { WorkspaceVolume } from './runtime.js'

export class HostVolume implements WorkspaceVolume {
  readonly workspaceId: string
  /** The host directory that is /data inside the workspace. */
  readonly hostDir: string
  /** The host user that owns /data when it is not serve's own (serve runs as root); null otherwise. */
  readonly owner: Owner | null

  constructor(workspaceId: string, hostDir: string, owner: Owner | null) {
    this.workspaceId = workspaceId
    this.hostDir = hostDir
    this.owner = owner
  }

  usage(options?: MeasureOptions): Promise<DiskUsage> {
    return measureDisk(this.hostDir, options)
  }

  async placeFiles(into: readonly string[], from: string, names: readonly string[]): Promise<void> {
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
