// The registry SnapshotStore against the real registry (Debian's docker-registry, distribution
// 2.8), through a forwarding proxy that can turn hostile: snapshots pushed by one replica list,
// restore and fork from another (a second store and driver with their own disks); a listing reads
// the index blob, never the archive; the registry failing mid-push (before the catalog), being
// down, a blob missing and a blob that does not match its digest end in one clear error with
// nothing half-written (docs/workspaces.md "Snapshots in the registry").
import { randomUUID } from 'node:crypto'
import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { create as tarCreate, extract as tarExtract } from 'tar'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { registrySettingsFromEnv } from '../../src/packs/index.js'
import { RegistrySnapshotStore, type ArchivableVolume } from '../../src/runtime/index.js'
import { snapshotStoreOf } from '../../src/serve/workspaces.js'
import { registryAvailable, startRegistry, type TestRegistry } from '../helpers/registry.js'
import { processRuntime, type ProcessRuntimeUnderTest } from './drivers.js'

const available = registryAvailable()

type Fault = 'drop' | 'corrupt' | undefined

/** Forwards every request to the registry; `fault` decides per request to cut it or flip a byte of the answer. */
class HostileProxy {
  readonly seen: string[] = []
  fault: (req: IncomingMessage) => Fault = () => undefined
  readonly #server: Server
  constructor(readonly upstream: string) {
    this.#server = createServer((req, res) => {
      this.seen.push(`${req.method} ${req.url}`)
      const fault = this.fault(req)
      if (fault === 'drop') {
        req.socket.destroy()
        return
      }
      const [host, port] = upstream.split(':')
      const out = httpRequest({ host, port: Number(port), method: req.method, path: req.url, headers: { ...req.headers, host: upstream } }, (up) => {
        // The registry's upload Location names its own address; a client comes back through the proxy
        // (a Location elsewhere on loopback is refused by the registry client's address guard).
        const headers = { ...up.headers }
        if (typeof headers.location === 'string') headers.location = headers.location.replace(upstream, this.host)
        res.writeHead(up.statusCode ?? 502, headers)
        if (fault !== 'corrupt') return void up.pipe(res)
        let first = true
        up.on('data', (chunk: Buffer) => {
          if (first && chunk.length > 0) chunk = Buffer.concat([Buffer.from([chunk[0]! ^ 0xff]), chunk.subarray(1)])
          first = false
          res.write(chunk)
        })
        up.on('end', () => res.end())
      })
      out.on('error', () => res.destroy())
      req.pipe(out)
    })
  }
  host = ''
  listen(): Promise<string> {
    return new Promise((resolve) => this.#server.listen(0, '127.0.0.1', () => resolve(this.host = `127.0.0.1:${(this.#server.address() as { port: number }).port}`)))
  }
  close(): Promise<void> {
    this.#server.closeAllConnections()
    return new Promise((resolve) => this.#server.close(() => resolve()))
  }
}

describe.skipIf(!available)('the registry snapshot store', () => {
  let registry: TestRegistry
  let proxy: HostileProxy
  let host: string
  let root: string
  const replicas: ProcessRuntimeUnderTest[] = []

  beforeAll(async () => {
    registry = await startRegistry()
    proxy = new HostileProxy(registry.host)
    host = await proxy.listen()
    root = await mkdtemp(join(tmpdir(), 'corral-regsnap-'))
  })
  afterAll(async () => {
    for (const r of replicas) await r.close()
    await proxy.close()
    await registry.stop()
    await rm(root, { recursive: true, force: true })
  })

  /** One "replica": its own store instance (own client, caches) and its own runtime disk. */
  const replica = (name: string) => {
    const store = new RegistrySnapshotStore({
      client: registrySettingsFromEnv({ CORRAL_PACK_REGISTRY: `${host}/corral` }).client, registry: host, namespace: 'corral', scratchDir: join(root, name, 'scratch'), ownScratch: true,
    })
    const runtime = processRuntime({ root: join(root, name, 'rt'), proxy: { host: '127.0.0.1', port: 1 }, warn: () => {}, snapshots: store })
    replicas.push(runtime)
    return { store, runtime }
  }
  const id = (p: string) => `ws_${p}_${randomUUID().slice(0, 8)}`

  it('any replica lists, reads and forks the snapshots another replica pushed', async () => {
    const a = replica('a1')
    const b = replica('b1')
    const parent = id('p')
    const ws = await a.runtime.provision({ workspaceId: parent })
    await mkdir(join(ws.dataDir, 'src'))
    await writeFile(join(ws.dataDir, 'src/main.py'), 'print(1)\n')
    const first = await a.runtime.snapshot(parent, 1, 'task')
    await writeFile(join(ws.dataDir, 'notes.md'), 'two\n')
    const second = await a.runtime.stop(parent, 2)
    expect(first).toMatchObject({ ref: `${parent}/000001-t1-task`, workspaceId: parent, taskCount: 1, reason: 'task' })
    expect(second).toMatchObject({ ref: `${parent}/000002-t2-stop`, taskCount: 2, reason: 'stop' })
    expect(second.sizeBytes).toBeGreaterThan(0)

    expect(await b.runtime.snapshots(parent)).toEqual([first, second])
    expect((await b.runtime.listSnapshotFiles(parent)).map((e) => e.path).sort()).toEqual(['notes.md', 'src', 'src/main.py'])
    expect((await b.runtime.listSnapshotFiles(parent, first.ref)).map((e) => e.path).sort()).toEqual(['src', 'src/main.py'])
    const file = (await b.runtime.listSnapshotFiles(parent)).find((e) => e.path === 'src/main.py')
    expect(file).toMatchObject({ size: 9, is_dir: false, mime_type: 'text/x-python' })
    expect(await b.store.at(parent, 1)).toEqual(first)
    expect(await b.store.at(parent, 7)).toBeNull()

    const child = id('c')
    const forked = await b.runtime.provision({ workspaceId: child, forkFrom: { workspaceId: parent, taskCount: 1 } })
    expect(forked.restoredFrom).toEqual(first)
    expect(await readFile(join(forked.dataDir, 'src/main.py'), 'utf8')).toBe('print(1)\n')
    expect(existsSync(join(forked.dataDir, 'notes.md'))).toBe(false)
  })

  it('lists from the index blob without pulling the archive', async () => {
    const a = replica('a2')
    const w = id('idx')
    const ws = await a.runtime.provision({ workspaceId: w })
    await writeFile(join(ws.dataDir, 'big.bin'), Buffer.alloc(300_000, 1))
    await a.runtime.snapshot(w, 1, 'task')
    const { archive, files } = await catalogOf(a.store, w)
    const reader = replica('b2')
    proxy.seen.length = 0
    expect((await reader.store.entries(w)).map((e) => e.path)).toEqual(['big.bin'])
    const blobGets = proxy.seen.filter((l) => l.startsWith('GET ') && l.includes('/blobs/'))
    expect(blobGets).toHaveLength(2) // the catalog and the file index
    expect(blobGets.some((l) => l.endsWith(files.digest))).toBe(true)
    expect(proxy.seen.some((l) => l.includes(archive.digest))).toBe(false)
    expect(await reader.store.list(w)).toHaveLength(1)
  })

  it('a registry failing before the catalog is pushed leaves no snapshot; the next one succeeds', async () => {
    const a = replica('a3')
    const w = id('mid')
    const ws = await a.runtime.provision({ workspaceId: w })
    await writeFile(join(ws.dataDir, 'a.txt'), 'a\n')
    const kept = await a.runtime.snapshot(w, 1, 'task')
    await writeFile(join(ws.dataDir, 'b.txt'), 'b\n')
    proxy.fault = (req) => (req.method === 'PUT' && req.url?.endsWith('/manifests/catalog') ? 'drop' : undefined)
    try {
      const err = await a.runtime.snapshot(w, 2, 'task').catch((e: unknown) => e)
      expect(err).toMatchObject({ code: 'runtime_unavailable' })
      expect((err as Error).message).toMatch(new RegExp(`^snapshot registry ${host}: recording the snapshot catalog of workspace ${w} failed: .*unreachable`))
    } finally {
      proxy.fault = () => undefined
    }
    const b = replica('b3')
    expect(await b.runtime.snapshots(w)).toEqual([kept])
    expect((await b.runtime.listSnapshotFiles(w)).map((e) => e.path)).toEqual(['a.txt'])
    const next = await a.runtime.snapshot(w, 2, 'task')
    expect(next.ref).toBe(`${w}/000002-t2-task`)
    expect((await b.runtime.listSnapshotFiles(w)).map((e) => e.path).sort()).toEqual(['a.txt', 'b.txt'])
  })

  it('a registry that is down fails put, list and fork with one clear error', async () => {
    const a = replica('a4')
    const w = id('down')
    const ws = await a.runtime.provision({ workspaceId: w })
    await writeFile(join(ws.dataDir, 'a.txt'), 'a\n')
    proxy.fault = () => 'drop'
    try {
      await expect(a.runtime.snapshot(w, 1, 'task')).rejects.toMatchObject({ code: 'runtime_unavailable', message: expect.stringMatching(/^snapshot registry .* failed: .*unreachable/) })
      await expect(a.runtime.snapshots(w)).rejects.toMatchObject({ code: 'runtime_unavailable' })
      const child = id('downc')
      await expect(a.runtime.provision({ workspaceId: child, forkFrom: { workspaceId: w, taskCount: 1 } })).rejects.toMatchObject({ code: 'runtime_unavailable' })
    } finally {
      proxy.fault = () => undefined
    }
    expect(await a.runtime.snapshots(w)).toEqual([])
  })

  it('a blob missing from the registry fails the listing and the fork clearly; the fork leaves no /data', async () => {
    const a = replica('a5')
    const w = id('miss')
    const ws = await a.runtime.provision({ workspaceId: w })
    await writeFile(join(ws.dataDir, 'a.txt'), 'a\n')
    await a.runtime.snapshot(w, 1, 'task')
    const catalog = await catalogOf(a.store, w)
    const repo = a.store.repositoryOf(w)
    for (const digest of [catalog.archive.digest, catalog.files.digest]) {
      const res = await fetch(`http://${registry.host}/v2/${repo}/blobs/${digest}`, { method: 'DELETE' })
      expect(res.status).toBe(202)
    }
    const b = replica('b5')
    await expect(b.runtime.listSnapshotFiles(w)).rejects.toMatchObject({ code: 'runtime_unavailable', message: expect.stringMatching(/reading the file index of snapshot .* failed: .*missing/) })
    const child = id('missc')
    await expect(b.runtime.provision({ workspaceId: child, forkFrom: { workspaceId: w, taskCount: 1 } }))
      .rejects.toMatchObject({ code: 'runtime_unavailable', message: expect.stringMatching(/downloading snapshot .* failed: .*missing/) })
    expect(existsSync(join(root, 'b5', 'rt', 'workspaces', child, 'data'))).toBe(false)
  })

  it('a blob that does not match its digest is refused before anything is unpacked', async () => {
    const a = replica('a6')
    const w = id('bad')
    const ws = await a.runtime.provision({ workspaceId: w })
    await writeFile(join(ws.dataDir, 'a.txt'), 'a\n')
    await a.runtime.snapshot(w, 1, 'task')
    const { archive, files } = await catalogOf(a.store, w)
    const b = replica('b6')
    proxy.fault = (req) => (req.method === 'GET' && (req.url?.endsWith(archive.digest) || req.url?.endsWith(files.digest)) ? 'corrupt' : undefined)
    try {
      await expect(b.store.entries(w)).rejects.toMatchObject({ code: 'runtime_unavailable', message: expect.stringMatching(/does not match its digest/) })
      const child = id('badc')
      await expect(b.runtime.provision({ workspaceId: child, forkFrom: { workspaceId: w, taskCount: 1 } }))
        .rejects.toMatchObject({ code: 'runtime_unavailable', message: expect.stringMatching(/does not match its digest/) })
      expect(existsSync(join(root, 'b6', 'rt', 'workspaces', child, 'data'))).toBe(false)
    } finally {
      proxy.fault = () => undefined
    }
    expect((await b.store.entries(w)).map((e) => e.path)).toEqual(['a.txt'])
  })

  it('remove forgets every snapshot of the workspace, on every replica', async () => {
    const a = replica('a7')
    const w = id('rm')
    await a.runtime.provision({ workspaceId: w })
    await a.runtime.snapshot(w, 0, 'stop')
    await a.store.remove(w)
    expect(await replica('b7').store.list(w)).toEqual([])
    const res = await fetch(`http://${registry.host}/v2/${a.store.repositoryOf(w)}/manifests/000001-t0-stop`, { headers: { accept: 'application/vnd.oci.image.manifest.v1+json' } })
    expect(res.status).toBe(404)
    await expect(a.store.entries(w)).rejects.toMatchObject({ code: 'not_found' })
  })

  it('archives and restores a volume that is not a host directory through its own tar (ArchivableVolume: a pod\'s PVC)', async () => {
    const { store } = replica('a8')
    const w = id('pod')
    const src = join(root, 'a8', 'pvc-src')
    await mkdir(join(src, 'dir'), { recursive: true })
    await writeFile(join(src, 'dir', 'f.txt'), 'from the pod\n')
    const calls: string[] = []
    const volume = (workspaceId: string, dir: string): ArchivableVolume => ({
      workspaceId,
      usage: async () => ({ usedBytes: 0 }),
      placeFiles: async () => {},
      archiveTo: async (file) => {
        calls.push(`archive ${workspaceId}`)
        await tarCreate({ file, cwd: dir }, ['dir'])
      },
      extractFrom: async (file) => {
        calls.push(`extract ${workspaceId}`)
        await tarExtract({ file, cwd: dir })
      },
    })
    const record = await store.put(volume(w, src), 1, 'task')
    expect((await replica('b8').store.entries(w)).map((e) => e.path).sort()).toEqual(['dir', 'dir/f.txt'])
    const dest = join(root, 'a8', 'pvc-dest')
    await mkdir(dest)
    await store.restore(record, volume(id('podc'), dest))
    expect(await readFile(join(dest, 'dir', 'f.txt'), 'utf8')).toBe('from the pod\n')
    expect(calls.map((c) => c.split(' ')[0])).toEqual(['archive', 'extract'])
  })

  it("sweeps a crashed process's staging leftovers from its own scratch directory before first use", async () => {
    const scratch = join(root, 'a9', 'scratch')
    await mkdir(join(scratch, 'corral-snapshot-crashed'), { recursive: true })
    await writeFile(join(scratch, 'corral-snapshot-crashed', 'snapshot.tar'), Buffer.alloc(4096))
    await writeFile(join(scratch, 'keep.txt'), 'not ours')
    const { runtime } = replica('a9')
    const w = id('sweep')
    await runtime.provision({ workspaceId: w })
    await runtime.snapshot(w, 0, 'stop')
    expect((await readdir(scratch)).sort()).toEqual(['keep.txt'])
  })

  /** The last snapshot's blob descriptors, read from the registry as any client would. */
  async function catalogOf(store: RegistrySnapshotStore, w: string): Promise<{ archive: { digest: string }; files: { digest: string } }> {
    const base = `http://${registry.host}/v2/${store.repositoryOf(w)}`
    const manifest = (await (await fetch(`${base}/manifests/catalog`, { headers: { accept: 'application/vnd.oci.image.manifest.v1+json' } })).json()) as { layers: { digest: string }[] }
    const body = (await (await fetch(`${base}/blobs/${manifest.layers[0]!.digest}`)).json()) as { snapshots: { archive: { digest: string }; files: { digest: string } }[] }
    return body.snapshots.at(-1)!
  }
})

describe('serve picks the snapshot store', () => {
  const settings = (env: NodeJS.ProcessEnv) => ({ dataDir: '/srv/corral', packRegistry: registrySettingsFromEnv(env) })

  it('the registry store under <namespace>/corral-snapshots/ when CORRAL_PACK_REGISTRY is set, the local tars otherwise', () => {
    const { snapshots } = snapshotStoreOf(settings({ CORRAL_PACK_REGISTRY: 'reg.example.com:5000/team/corral' }))
    expect(snapshots).toBeInstanceOf(RegistrySnapshotStore)
    expect((snapshots as RegistrySnapshotStore).repositoryOf('ws_0191abc')).toBe('team/corral/corral-snapshots/ws_0191abc')
    expect(snapshotStoreOf(settings({}))).toEqual({})
  })
})
