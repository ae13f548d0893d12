// The fake API server's kubelet: a scheduled pod's volumes are materialised in a temp dir (a claim
// is a directory that outlives its pods, a Secret volume its files, an emptyDir a fresh directory),
// and its `agent` container runs as a local process with the pod's environment (Secret references
// resolved) and every container path rewritten to the host directory mounted there. Other
// containers (the keeper) only count as running: exec runs their commands the same way (exec.ts).
// An image volume is the image pulled by its reference from a real registry (image-volume.ts),
// flattened into a directory nobody may write. What it does not do: container images, the
// security context (users only with runAsPodUser), resource limits, NetworkPolicy.
import { type ChildProcess, spawn } from 'node:child_process'
import { chmodSync, chownSync, mkdirSync, writeFileSync, rmSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { pullImageVolume } from './image-volume.js'
import { ContainerLog } from './logs.js'
import { KubeError, type KubeObject, type ObjectStore } from './store.js'

export interface KubeletOptions {
  /** Host directory for claims and pod volumes. */
  root?: string
  /** Delay before a scheduled pod runs (a slow image pull). */
  startDelayMs?: number
  /**
   * Run the `agent` container as the pod's `securityContext.runAsUser`/`runAsGroup` (when the
   * tests run as root), its claims and emptyDirs owned by that user as `fsGroup` makes them: what
   * a read-only mount means is then the kernel's answer, not the fake's.
   */
  runAsPodUser?: boolean
  /**
   * Host directories that stand for the agent image's own files (default: this checkout and the
   * node binary's directory): the container command a test gives is a host path there, which no
   * mount may rewrite — a checkout under /tmp would otherwise be looked up in the pod's /tmp
   * emptyDir (a fresh clone in /tmp failed every kubernetes e2e: agent_exited).
   */
  imageRoots?: string[]
}

interface Container { name: string; command?: string[]; args?: string[]; workingDir?: string; env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[]; volumeMounts?: { name: string; mountPath: string }[] }
interface Volume { name: string; persistentVolumeClaim?: { claimName: string }; secret?: { secretName: string; defaultMode?: number; items?: { key: string; path: string; mode?: number }[] }; emptyDir?: object; image?: { reference: string } }

interface RunningPod {
  namespace: string
  name: string
  mounts: Map<string, Map<string, string>>
  processes: Map<string, ChildProcess>
  /** Each started container's output (the keeper's stays empty: it runs nothing here). */
  logs: Map<string, ContainerLog>
  timer?: NodeJS.Timeout
  deleting?: boolean
}

export class Kubelet {
  readonly root: string
  startDelayMs: number
  readonly runAsPodUser: boolean
  readonly #imageRoots: string[]
  /** Image references pulled for image volumes (tests: the pull happened, by digest). */
  readonly pulled: string[] = []
  readonly #store: ObjectStore
  readonly #pods = new Map<string, RunningPod>()

  constructor(store: ObjectStore, options: KubeletOptions) {
    this.#store = store
    this.root = options.root ?? join(process.env.TMPDIR ?? '/tmp', `fake-kube-${process.pid}-${Date.now()}`)
    this.startDelayMs = options.startDelayMs ?? 20
    this.runAsPodUser = options.runAsPodUser === true && process.getuid?.() === 0
    this.#imageRoots = options.imageRoots ?? [process.cwd(), dirname(process.execPath)]
    mkdirSync(this.root, { recursive: true })
  }

  /** Host directory of a claim (what a test reads to see /data). */
  claimDir(claimName: string): string {
    return join(this.root, 'claims', claimName)
  }

  schedule(namespace: string, name: string): void {
    const pod: RunningPod = { namespace, name, mounts: new Map(), processes: new Map(), logs: new Map() }
    this.#pods.set(`${namespace}/${name}`, pod)
    this.#store.update('pods', namespace, name, (o) => {
      o.spec = { ...o.spec, nodeName: 'fake-node' }
      o.status = { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'True' }], qosClass: 'Burstable' }
    })
    pod.timer = setTimeout(() => void this.#start(pod), this.startDelayMs)
  }

  async #start(pod: RunningPod, attempt = 0): Promise<void> {
    pod.timer = undefined
    if (pod.deleting) return
    const obj = this.#store.find('pods', pod.namespace, pod.name)
    if (!obj) return
    try {
      await this.#materialise(pod, obj)
      if (pod.deleting || !this.#store.find('pods', pod.namespace, pod.name)) return
    } catch (err) {
      // A missing claim or Secret: the real kubelet keeps the pod Pending and retries.
      if (attempt < 100) pod.timer = setTimeout(() => void this.#start(pod, attempt + 1), 50)
      this.#setWaiting(pod, (err as Error).message)
      return
    }
    const containers = (obj.spec?.containers ?? []) as Container[]
    for (const c of containers) {
      pod.logs.set(c.name, new ContainerLog())
      if (c.name === 'agent') this.#run(pod, obj, c)
    }
    this.#store.update('pods', pod.namespace, pod.name, (o) => {
      o.status = {
        phase: 'Running', podIP: '127.0.0.1', startTime: new Date().toISOString(), qosClass: 'Burstable',
        conditions: [{ type: 'PodScheduled', status: 'True' }, { type: 'Initialized', status: 'True' }, { type: 'ContainersReady', status: 'True' }, { type: 'Ready', status: 'True' }],
        containerStatuses: containers.map((c) => ({ name: c.name, ready: true, restartCount: 0, image: 'fake', imageID: 'fake', started: true, state: { running: { startedAt: new Date().toISOString() } } })),
      }
    })
  }

  #setWaiting(pod: RunningPod, message: string): void {
    this.#store.update('pods', pod.namespace, pod.name, (o) => {
      o.status = { ...o.status, phase: 'Pending', message }
    })
  }

  async #materialise(pod: RunningPod, obj: KubeObject): Promise<void> {
    const volumes = new Map<string, string>()
    const owner = this.#podUser(obj)
    for (const v of (obj.spec?.volumes ?? []) as Volume[]) {
      if (v.persistentVolumeClaim) {
        this.#store.get('persistentvolumeclaims', pod.namespace, v.persistentVolumeClaim.claimName)
        const dir = this.claimDir(v.persistentVolumeClaim.claimName)
        mkdirSync(dir, { recursive: true })
        if (owner) chownSync(dir, owner.uid, owner.gid)
        volumes.set(v.name, dir)
      } else if (v.image) {
        const dir = join(this.root, 'pods', pod.name, v.name)
        await pullImageVolume(v.image.reference, dir)
        this.pulled.push(v.image.reference)
        volumes.set(v.name, dir)
      } else if (v.secret) {
        const secret = this.#store.get('secrets', pod.namespace, v.secret.secretName)
        const dir = join(this.root, 'pods', pod.name, v.name)
        mkdirSync(dir, { recursive: true })
        const data = (secret.data ?? {}) as Record<string, string>
        const items: { key: string; path: string; mode?: number }[] = v.secret.items ?? Object.keys(data).map((key) => ({ key, path: key }))
        for (const item of items) {
          if (!Object.hasOwn(data, item.key)) throw new Error(`secret ${v.secret.secretName} has no key ${item.key}`)
          // The kubelet's modes: the item's, else defaultMode, else 0644; with an fsGroup the file
          // goes to root:fsGroup with the group read bit added (a Secret volume is read-only).
          const file = join(dir, item.path)
          writeFileSync(file, Buffer.from(data[item.key]!, 'base64'))
          const mode = item.mode ?? v.secret.defaultMode ?? 0o644
          chmodSync(file, owner?.fsGroup === undefined ? mode : mode | 0o440)
          if (owner?.fsGroup !== undefined) chownSync(file, 0, owner.fsGroup)
        }
        volumes.set(v.name, dir)
      } else {
        const dir = join(this.root, 'pods', pod.name, v.name)
        mkdirSync(dir, { recursive: true })
        if (owner) chownSync(dir, owner.uid, owner.gid)
        volumes.set(v.name, dir)
      }
    }
    for (const c of (obj.spec?.containers ?? []) as Container[]) {
      const mounts = new Map<string, string>()
      for (const m of c.volumeMounts ?? []) {
        const host = volumes.get(m.name)
        if (!host) throw new Error(`container ${c.name} mounts unknown volume ${m.name}`)
        mounts.set(m.mountPath, host)
      }
      pod.mounts.set(c.name, mounts)
    }
  }

  /** The pod's user and group when this kubelet runs agents as them (runAsPodUser). */
  #podUser(obj: KubeObject): { uid: number; gid: number; fsGroup?: number } | undefined {
    if (!this.runAsPodUser) return undefined
    const sc = (obj.spec?.securityContext ?? {}) as { runAsUser?: number; runAsGroup?: number; fsGroup?: number }
    if (sc.runAsUser === undefined) return undefined
    return { uid: sc.runAsUser, gid: sc.fsGroup ?? sc.runAsGroup ?? sc.runAsUser, ...(sc.fsGroup === undefined ? {} : { fsGroup: sc.fsGroup }) }
  }

  /** A container path as the host sees it (the longest mount prefix wins); other strings unchanged. */
  mapPath(pod: RunningPod, container: string, value: string): string {
    if (this.#imageRoots.some((r) => value === r || value.startsWith(`${r}/`))) return value
    const mounts = [...(pod.mounts.get(container) ?? new Map<string, string>()).entries()].sort((a, b) => b[0].length - a[0].length)
    for (const [path, host] of mounts) {
      if (value === path) return host
      if (value.startsWith(`${path}/`)) return host + value.slice(path.length)
    }
    return value
  }

  #env(pod: RunningPod, c: Container): Record<string, string> {
    const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin' }
    for (const e of c.env ?? []) {
      const ref = e.valueFrom?.secretKeyRef
      const value = ref ? Buffer.from(((this.#store.get('secrets', pod.namespace, ref.name).data ?? {}) as Record<string, string>)[ref.key] ?? '', 'base64').toString('utf8') : (e.value ?? '')
      env[e.name] = this.mapPath(pod, c.name, value)
    }
    return env
  }

  #run(pod: RunningPod, obj: KubeObject, c: Container): void {
    const argv = [...(c.command ?? []), ...(c.args ?? [])].map((a) => this.mapPath(pod, c.name, a))
    const dir = join(this.root, 'pods', pod.name)
    mkdirSync(dir, { recursive: true })
    const user = this.#podUser(obj)
    const child = spawn(argv[0]!, argv.slice(1), { cwd: this.mapPath(pod, c.name, c.workingDir ?? '/'), env: this.#env(pod, c), stdio: ['ignore', 'pipe', 'pipe'], detached: true, ...(user ? { uid: user.uid, gid: user.gid } : {}) })
    // The container runtime reads stdout and stderr into the container's log (logs.ts).
    const log = pod.logs.get(c.name)!
    log.attach(child.stdout!)
    log.attach(child.stderr!)
    pod.processes.set(c.name, child)
    child.once('error', () => {})
    // A container ends with its main process: what it left running goes with it (a real runtime
    // tears down the container's PID namespace), so nothing holds the log's pipes open.
    child.once('exit', () => {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL')
      } catch {
        // the group is already gone
      }
    })
    child.once('close', (code, signal) => {
      pod.processes.delete(c.name)
      if (pod.deleting || !this.#store.find('pods', pod.namespace, pod.name)) return
      const exitCode = code ?? 128 + (signal === 'SIGKILL' ? 9 : 15)
      this.#store.update('pods', pod.namespace, pod.name, (o) => {
        const statuses = (o.status?.containerStatuses ?? []) as { name: string; ready: boolean; state: object }[]
        for (const s of statuses) {
          if (s.name !== c.name) continue
          s.ready = false
          s.state = { terminated: { exitCode, reason: exitCode === 0 ? 'Completed' : 'Error', finishedAt: new Date().toISOString() } }
        }
      })
    })
  }

  /** Graceful deletion: deletionTimestamp now, SIGTERM, SIGKILL after the grace period, then gone. */
  delete(namespace: string, name: string, graceSeconds: number): KubeObject {
    const pod = this.#pods.get(`${namespace}/${name}`)
    if (!pod || pod.processes.size === 0) {
      if (pod?.timer) clearTimeout(pod.timer)
      this.#forget(namespace, name)
      return this.#store.remove('pods', namespace, name)
    }
    pod.deleting = true
    const marked = this.#store.update('pods', namespace, name, (o) => {
      o.metadata.deletionTimestamp = new Date().toISOString()
      o.metadata.deletionGracePeriodSeconds = graceSeconds
    })!
    const kill = setTimeout(() => pod.processes.forEach((p) => p.kill('SIGKILL')), Math.max(0, graceSeconds) * 1000)
    void Promise.all([...pod.processes.values()].map((p) => new Promise((r) => {
      p.once('close', r)
      p.kill('SIGTERM')
    }))).then(() => {
      clearTimeout(kill)
      this.#forget(namespace, name)
      if (this.#store.find('pods', namespace, name)) this.#store.remove('pods', namespace, name)
    })
    return marked
  }

  /** Node-pressure eviction: the containers are killed, the pod stays as Failed / Evicted. */
  evict(namespace: string, name: string): void {
    const pod = this.#pods.get(`${namespace}/${name}`)
    if (!pod) throw new KubeError(404, 'NotFound', `pods "${name}" not found`)
    pod.deleting = true
    for (const p of pod.processes.values()) p.kill('SIGKILL')
    this.#store.update('pods', namespace, name, (o) => {
      const statuses = (o.status?.containerStatuses ?? []) as { name: string; ready: boolean; state: object }[]
      o.status = {
        ...o.status, phase: 'Failed', reason: 'Evicted', message: 'The node was low on resource: ephemeral-storage.',
        containerStatuses: statuses.map((s) => ({ ...s, ready: false, state: { terminated: { exitCode: 137, reason: 'Error', finishedAt: new Date().toISOString() } } })),
      }
    })
  }

  /** What exec needs of a running container: its path mapping, working directory and environment. */
  execTarget(namespace: string, name: string, container: string): { map: (s: string) => string; cwd: string; env: Record<string, string> } {
    const obj = this.#store.find('pods', namespace, name)
    const pod = this.#pods.get(`${namespace}/${name}`)
    if (!obj || !pod) throw new KubeError(404, 'NotFound', `pods "${name}" not found`)
    const c = ((obj.spec?.containers ?? []) as Container[]).find((x) => x.name === container)
    if (!c) throw new KubeError(400, 'BadRequest', `container ${container} is not valid for pod ${name}`)
    const st = ((obj.status?.containerStatuses ?? []) as { name: string; state: { running?: object } }[]).find((s) => s.name === container)
    if (obj.status?.phase !== 'Running' || !st?.state.running || pod.deleting) throw new KubeError(400, 'BadRequest', `container ${container} is not running`)
    return { map: (s) => this.mapPath(pod, container, s), cwd: this.mapPath(pod, container, c.workingDir ?? '/'), env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } }
  }

  /**
   * A container's log as `GET …/log` reads it: 404 for a pod that is gone, 400 for a container the
   * pod does not have or that has not started (the API server's "is waiting to start").
   */
  containerLog(namespace: string, name: string, container: string | null): ContainerLog {
    const obj = this.#store.get('pods', namespace, name)
    const containers = (obj.spec?.containers ?? []) as Container[]
    const c = container ? containers.find((x) => x.name === container) : containers.length === 1 ? containers[0] : undefined
    if (!c) throw new KubeError(400, 'BadRequest', container ? `container ${container} is not valid for pod ${name}` : `a container name must be specified for pod ${name}, choose one of: [${containers.map((x) => x.name).join(' ')}]`)
    const log = this.#pods.get(`${namespace}/${name}`)?.logs.get(c.name)
    if (!log) throw new KubeError(400, 'BadRequest', `container "${c.name}" in pod "${name}" is waiting to start: ContainerCreating`)
    return log
  }

  #forget(namespace: string, name: string): void {
    for (const log of this.#pods.get(`${namespace}/${name}`)?.logs.values() ?? []) log.finish()
    this.#pods.delete(`${namespace}/${name}`)
    rmSync(join(this.root, 'pods', name), { recursive: true, force: true })
  }

  async close(): Promise<void> {
    const waits: Promise<unknown>[] = []
    for (const pod of this.#pods.values()) {
      if (pod.timer) clearTimeout(pod.timer)
      pod.deleting = true
      for (const p of pod.processes.values()) {
        waits.push(new Promise((r) => p.once('close', r)))
        p.kill('SIGKILL')
      }
    }
    await Promise.all(waits)
    rmSync(this.root, { recursive: true, force: true })
  }
}
