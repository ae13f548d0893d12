// A workspace's /data on a PersistentVolumeClaim, reached through a running pod of the workspace
// (its keeper container): measured with `du`, filled with `tar` over exec. Placement unpacks inside
// the pod as the pod's non-root user: a link the workspace made can only lead to what that user
// could write anyway (the root filesystem is read-only), so nothing of the host is reachable.
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { create as tarCreate } from 'tar'
import type { DiskUsage, MeasureOptions } from '../disk-usage.js'
import { RuntimeError } from '../errors.js'
import type { TarVolume } from '../registry-snapshot-store.js'
import type { ArchivableVolume } from '../runtime.js'
import type { KubeClient } from './kube-client.js'
import { KEEPER_CONTAINER, POD_PATHS } from './manifests.js'
import { archiveTo, execIn, extractFrom, type ExecTarget } from './pod-exec.js'

export class KubeVolume implements ArchivableVolume, TarVolume {
  readonly workspaceId: string
  readonly claimName: string
  readonly #client: KubeClient
  readonly #pod: () => Promise<ExecTarget>

  /** `pod` names a running pod of the workspace (the driver starts a keeper when none runs). */
  constructor(client: KubeClient, workspaceId: string, claimName: string, pod: () => Promise<{ namespace: string; pod: string }>) {
    this.workspaceId = workspaceId
    this.claimName = claimName
    this.#client = client
    this.#pod = async () => ({ ...(await pod()), container: KEEPER_CONTAINER })
  }

  async usage(options?: MeasureOptions): Promise<DiskUsage> {
    const out = new PassThrough()
    let text = ''
    out.on('data', (d: Buffer) => (text += d.toString('utf8')))
    const run = execIn(this.#client, await this.#pod(), ['du', '-s', '-B1', POD_PATHS.data], { stdout: out })
    const timeout = options?.timeoutMs ?? 30_000
    let timer: NodeJS.Timeout | undefined
    const limit = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`du in the pod of workspace ${this.workspaceId} did not answer within ${timeout} ms`)), timeout)
      options?.signal?.addEventListener('abort', () => reject(options.signal?.reason ?? new Error('aborted')), { once: true })
    })
    try {
      await Promise.race([run, limit])
    } finally {
      clearTimeout(timer)
    }
    const used = Number.parseInt(text.trim().split(/\s+/)[0] ?? '', 10)
    if (!Number.isFinite(used)) throw new Error(`du in the pod of workspace ${this.workspaceId} printed no size`)
    return { usedBytes: used }
  }

  async placeFiles(into: readonly string[], from: string, names: readonly string[]): Promise<void> {
    for (const part of [...into, ...names]) {
      if (!part || part === '.' || part === '..' || part.includes('/')) throw new RuntimeError('unsafe_path', `invalid path component ${JSON.stringify(part)}`)
    }
    const dir = await mkdtemp(join(tmpdir(), 'corral-place-'))
    try {
      const file = join(dir, 'place.tar')
      await tarCreate({ file, cwd: from, prefix: into.join('/'), portable: true }, [...names])
      await extractFrom(this.#client, await this.#pod(), POD_PATHS.data, file)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  }

  async archiveTo(file: string): Promise<void> {
    await archiveTo(this.#client, await this.#pod(), POD_PATHS.data, file)
  }

  async extractFrom(file: string): Promise<void> {
    await extractFrom(this.#client, await this.#pod(), POD_PATHS.data, file)
  }

  /** The registry snapshot store's names for the same two (RegistrySnapshotStore, TarVolume). */
  writeTar(file: string): Promise<void> {
    return this.archiveTo(file)
  }

  readTar(file: string): Promise<void> {
    return this.extractFrom(file)
  }
}
