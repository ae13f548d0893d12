// A fake Kubernetes API server for the driver suite (test/runtime/kubernetes/), written from the
// API reference: REST verbs on pods, persistentvolumeclaims, secrets, services, endpoints and
// networkpolicies with the real status codes and `Status` bodies, resourceVersion and label
// selectors, watch streams (newline-delimited WatchEvent JSON, ERROR 410 Expired for a compacted
// resourceVersion), pod exec over WebSocket (exec.ts) and a kubelet that runs pods as local
// processes (kubelet.ts). Hostile on request: dropped watches, conflicts, slow starts, evictions.
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import { createServer } from 'node:https'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LeafMinter, loadOrCreateCa } from '../../../src/proxy/index.js'
import type { AddressInfo, Socket } from 'node:net'
import { WebSocketServer, type WebSocket } from 'ws'
import { handleExec } from './exec.js'
import { Kubelet, type KubeletOptions } from './kubelet.js'
import { serveLog, type LogHostility } from './logs.js'
import { KubeError, matchesSelector, ObjectStore, status, type KubeObject, type StoredEvent } from './store.js'

const KINDS: Record<string, string> = {
  pods: 'Pod', persistentvolumeclaims: 'PersistentVolumeClaim', secrets: 'Secret', services: 'Service', endpoints: 'Endpoints', networkpolicies: 'NetworkPolicy',
}
const CORE = /^\/api\/v1\/namespaces\/([^/]+)\/(pods|persistentvolumeclaims|secrets|services|endpoints)(?:\/([^/]+))?(?:\/(exec|status|log))?$/
const NETWORKING = /^\/apis\/networking\.k8s\.io\/v1\/namespaces\/([^/]+)\/(networkpolicies)(?:\/([^/]+))?$/
const NAMESPACE = /^\/api\/v1\/namespaces\/([^/]+)$/

export interface FakeKubeOptions extends KubeletOptions {
  namespaces?: string[]
}

/** One request as the fake saw it (tests assert on what the driver asked for). */
export interface SeenRequest { method: string; path: string; query: string }

export class FakeKube {
  readonly store = new ObjectStore()
  readonly kubelet: Kubelet
  readonly requests: SeenRequest[] = []
  #server!: Server
  #wss = new WebSocketServer({ noServer: true, handleProtocols: (protocols: Set<string>) => ['v5.channel.k8s.io', 'v4.channel.k8s.io'].find((p) => protocols.has(p)) ?? false })
  readonly #watches = new Set<ServerResponse>()
  readonly #logStreams = new Set<ServerResponse>()
  /** Hostile log streams (logs.ts): cut mid-line after some lines, or written slowly. */
  readonly logHostility: LogHostility = {}
  readonly #sockets = new Set<Socket>()
  readonly #conflicts = new Map<string, number>()
  readonly #namespaces: Set<string>
  url = ''
  /** PEM of the CA that signed the server's certificate (the kubeconfig's certificate-authority-data). */
  caPem = ''
  /** The bearer token the server accepts; anything else is 401 Unauthorized. */
  readonly token = 'fake-kube-token'

  private constructor(options: FakeKubeOptions) {
    this.#namespaces = new Set(options.namespaces ?? ['corral'])
    this.kubelet = new Kubelet(this.store, options)
  }

  static async start(options: FakeKubeOptions = {}): Promise<FakeKube> {
    const fake = new FakeKube(options)
    // HTTPS like every API server: a CA of the test's own, trusted through the kubeconfig.
    const caDir = await mkdtemp(join(tmpdir(), 'fake-kube-ca-'))
    const ca = await loadOrCreateCa(caDir)
    await rm(caDir, { recursive: true, force: true })
    fake.caPem = ca.certPem
    fake.#server = createServer(await new LeafMinter(ca).pemFor('127.0.0.1'), (req, res) => void fake.#handle(req, res))
    fake.#server.on('connection', (s) => {
      fake.#sockets.add(s)
      s.once('close', () => fake.#sockets.delete(s))
    })
    fake.#server.on('upgrade', (req, socket, head) => fake.#upgrade(req, socket as Socket, head))
    await new Promise<void>((resolve) => fake.#server.listen(0, '127.0.0.1', resolve))
    fake.url = `https://127.0.0.1:${(fake.#server.address() as AddressInfo).port}`
    return fake
  }

  /** A kubeconfig (YAML) pointing at this server, for KUBECONFIG / CORRAL_K8S_KUBECONFIG. */
  kubeconfig(namespace = 'corral'): string {
    return [
      'apiVersion: v1', 'kind: Config', 'current-context: fake',
      'clusters:', `- name: fake`, `  cluster:`, `    server: ${this.url}`, `    certificate-authority-data: ${Buffer.from(this.caPem).toString('base64')}`,
      'users:', '- name: fake', '  user:', `    token: ${this.token}`,
      'contexts:', '- name: fake', '  context:', '    cluster: fake', '    user: fake', `    namespace: ${namespace}`,
    ].join('\n')
  }

  // ---- hostile switches ----

  /** Ends every open watch stream (abruptly: the socket is destroyed; else a clean end). */
  dropWatches(abrupt = true): void {
    for (const res of this.#watches) {
      if (abrupt) res.socket?.destroy()
      else res.end()
    }
    this.#watches.clear()
  }

  /** Forgets the event history: resuming a watch from an older resourceVersion gets 410 Gone. */
  compact(): void {
    this.store.compact()
  }

  /** The next `count` writes (PUT, PATCH) of `resource` answer 409 Conflict. */
  conflictNext(resource: string, count = 1): void {
    this.#conflicts.set(resource, count)
  }

  /** Resources the caller's (fake) Role does not grant: every verb on them answers 403 Forbidden. */
  readonly forbidden = new Set<string>()
  /** Namespaces where the (fake) Role grants nothing (a Role is namespaced): every verb there answers 403. */
  readonly forbiddenNamespaces = new Set<string>()

  get openLogStreams(): number {
    return this.#logStreams.size
  }

  get openWatches(): number {
    return this.#watches.size
  }

  async close(): Promise<void> {
    this.dropWatches()
    for (const res of this.#logStreams) res.socket?.destroy()
    await this.kubelet.close()
    for (const c of this.#wss.clients) c.terminate()
    for (const s of this.#sockets) s.destroy()
    await new Promise<void>((resolve) => this.#server.close(() => resolve()))
  }

  // ---- the API ----

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake')
    this.requests.push({ method: req.method ?? 'GET', path: url.pathname, query: url.search })
    try {
      if (req.headers.authorization !== `Bearer ${this.token}`) throw new KubeError(401, 'Unauthorized', 'Unauthorized')
      const ns = NAMESPACE.exec(url.pathname)
      if (ns && req.method === 'GET') return this.#namespace(ns[1]!, res)
      const m = CORE.exec(url.pathname) ?? NETWORKING.exec(url.pathname)
      if (!m) throw new KubeError(404, 'NotFound', `the server could not find the requested resource`)
      const [, namespace, resource, name, sub] = m as unknown as [string, string, string, string | undefined, string | undefined]
      if (!this.#namespaces.has(namespace)) throw new KubeError(404, 'NotFound', `namespaces "${namespace}" not found`, { name: namespace, kind: 'namespaces' })
      if (sub === 'exec') throw new KubeError(400, 'BadRequest', 'Upgrade request required')
      if (sub === 'log' && resource === 'pods' && name && req.method === 'GET') {
        if (this.forbidden.has('pods/log')) throw new KubeError(403, 'Forbidden', `pods "${name}" is forbidden: User "system:serviceaccount:${namespace}:corral" cannot get resource "pods/log" in API group "" in the namespace "${namespace}"`, { name, kind: 'pods' })
        return serveLog(this.kubelet.containerLog(namespace, name, url.searchParams.get('container')), url.searchParams, res, this.logHostility, this.#logStreams)
      }
      const body = ['POST', 'PUT', 'PATCH'].includes(req.method ?? '') ? await readJson(req) : undefined
      const out = await this.#verb(req.method ?? 'GET', resource, namespace, name, url.searchParams, body, res)
      if (out !== undefined) send(res, out.code, out.body)
    } catch (err) {
      const e = err instanceof KubeError ? err : new KubeError(500, 'InternalError', (err as Error).message)
      if (!res.headersSent) send(res, e.code, e.body())
      else res.end()
    }
  }

  #namespace(name: string, res: ServerResponse): void {
    if (!this.#namespaces.has(name)) throw new KubeError(404, 'NotFound', `namespaces "${name}" not found`, { name, kind: 'namespaces' })
    send(res, 200, { apiVersion: 'v1', kind: 'Namespace', metadata: { name }, status: { phase: 'Active' } })
  }

  // long-function: one switch over the verbs reads like the API reference's table
  async #verb(method: string, resource: string, namespace: string, name: string | undefined, q: URLSearchParams, body: KubeObject | undefined, res: ServerResponse): Promise<{ code: number; body: unknown } | undefined> {
    const kind = KINDS[resource]!
    if (this.forbidden.has(resource) || this.forbiddenNamespaces.has(namespace)) {
      throw new KubeError(403, 'Forbidden', `${resource}${name ? ` "${name}"` : ''} is forbidden: User "system:serviceaccount:${namespace}:corral" cannot ${method.toLowerCase()} resource "${resource}" in API group "" in the namespace "${namespace}"`, { ...(name ? { name } : {}), kind: resource })
    }
    if (method === 'GET' && !name) {
      if (q.get('watch') === 'true' || q.get('watch') === '1') {
        this.#watch(resource, namespace, q, res)
        return undefined
      }
      const items = this.store.list(resource, namespace, q.get('labelSelector')).filter((o) => fieldMatches(o, q.get('fieldSelector')))
      return { code: 200, body: { apiVersion: resource === 'networkpolicies' ? 'networking.k8s.io/v1' : 'v1', kind: `${kind}List`, metadata: { resourceVersion: String(this.store.resourceVersion) }, items } }
    }
    if (method === 'GET') return { code: 200, body: this.store.get(resource, namespace, name!) }
    if (method === 'POST' && !name) {
      if (!body || typeof body !== 'object' || !body.metadata) throw new KubeError(400, 'BadRequest', 'the body of the request was in an unknown format')
      if (body.metadata.namespace && body.metadata.namespace !== namespace) throw new KubeError(400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request')
      const created = this.store.create(resource, namespace, { ...body, kind, apiVersion: body.apiVersion ?? 'v1' })
      if (resource === 'pods') this.kubelet.schedule(namespace, created.metadata.name)
      return { code: 201, body: created }
    }
    if ((method === 'PUT' || method === 'PATCH') && name) {
      this.#maybeConflict(resource, name)
      if (method === 'PUT') return { code: 200, body: this.store.replace(resource, namespace, name, body!) }
      const current = this.store.get(resource, namespace, name)
      return { code: 200, body: this.store.replace(resource, namespace, name, mergePatch(current, body) as KubeObject) }
    }
    if (method === 'DELETE' && name) {
      const obj = this.store.get(resource, namespace, name)
      if (resource !== 'pods') return { code: 200, body: this.store.remove(resource, namespace, name) }
      const grace = Number(q.get('gracePeriodSeconds') ?? (body as { gracePeriodSeconds?: number } | undefined)?.gracePeriodSeconds ?? obj.spec?.terminationGracePeriodSeconds ?? 30)
      return { code: 200, body: this.kubelet.delete(namespace, name, grace) }
    }
    throw new KubeError(405, 'MethodNotAllowed', `the server does not allow this method on the requested resource`)
  }

  #maybeConflict(resource: string, name: string): void {
    const left = this.#conflicts.get(resource) ?? 0
    if (left <= 0) return
    this.#conflicts.set(resource, left - 1)
    throw new KubeError(409, 'Conflict', `Operation cannot be fulfilled on ${resource} "${name}": the object has been modified; please apply your changes to the latest version and try again`, { name, kind: resource })
  }

  #watch(resource: string, namespace: string, q: URLSearchParams, res: ServerResponse): void {
    const selector = q.get('labelSelector')
    const rvParam = q.get('resourceVersion')
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' })
    const write = (type: string, object: unknown): void => {
      res.write(`${JSON.stringify({ type, object })}\n`)
    }
    const rv = rvParam && rvParam !== '0' ? Number(rvParam) : undefined
    if (rv !== undefined && rv < this.store.compactedBefore) {
      write('ERROR', status(410, 'Expired', `too old resource version: ${rv} (${this.store.compactedBefore})`))
      res.end()
      return
    }
    this.#watches.add(res)
    const matches = (e: StoredEvent): boolean => e.resource === resource && e.namespace === namespace && matchesSelector(e.object.metadata.labels, selector)
    if (rv === undefined) for (const o of this.store.list(resource, namespace, selector)) write('ADDED', o)
    else for (const e of this.store.since(resource, namespace, rv)) if (matches(e)) write(e.type, e.object)
    const off = this.store.onEvent((e) => {
      if (matches(e)) write(e.type, e.object)
    })
    const timeout = Number(q.get('timeoutSeconds') ?? 0)
    const timer = timeout > 0 ? setTimeout(() => res.end(), timeout * 1000) : undefined
    res.once('close', () => {
      off()
      if (timer) clearTimeout(timer)
      this.#watches.delete(res)
    })
  }

  #upgrade(req: IncomingMessage, socket: Socket, head: Buffer): void {
    const url = new URL(req.url ?? '/', 'http://fake')
    const m = CORE.exec(url.pathname)
    if (req.headers.authorization !== `Bearer ${this.token}`) {
      socket.end('HTTP/1.1 401 Unauthorized\r\n\r\n')
      return
    }
    if (!m || m[4] !== 'exec' || m[2] !== 'pods') {
      socket.end('HTTP/1.1 404 Not Found\r\n\r\n')
      return
    }
    this.requests.push({ method: 'EXEC', path: url.pathname, query: url.search })
    this.#wss.handleUpgrade(req, socket, head, (ws: WebSocket) => handleExec(ws, this.kubelet, m[1]!, m[3]!, url.searchParams))
  }
}

function send(res: ServerResponse, code: number, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}

async function readJson(req: IncomingMessage): Promise<KubeObject> {
  const chunks: Buffer[] = []
  for await (const c of req) chunks.push(c as Buffer)
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as KubeObject
  } catch {
    throw new KubeError(400, 'BadRequest', 'the body of the request was in an unknown format')
  }
}

function fieldMatches(o: KubeObject, selector: string | null): boolean {
  if (!selector) return true
  return selector.split(',').every((term) => {
    const [field, value] = term.split('=')
    if (field === 'metadata.name') return o.metadata.name === value
    if (field === 'status.phase') return (o.status?.phase as string | undefined) === value
    throw new KubeError(400, 'BadRequest', `"${field}" is not a known field selector`)
  })
}

/** RFC 7386 JSON merge patch. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch
  const out: Record<string, unknown> = target && typeof target === 'object' && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {}
  for (const [k, v] of Object.entries(patch as Record<string, unknown>)) {
    if (v === null) delete out[k]
    else out[k] = mergePatch(out[k], v)
  }
  return out
}
