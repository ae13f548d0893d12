// The fake API server's object store (docs: Kubernetes API concepts, "Resource versions",
// "Efficient detection of changes"): one resourceVersion counter for every object, an event
// history that watches replay from, and a compaction point before which a watch gets 410 Gone.
import { randomUUID } from 'node:crypto'

export type KubeObject = {
  apiVersion?: string
  kind?: string
  metadata: { name: string; namespace?: string; uid?: string; resourceVersion?: string; labels?: Record<string, string>; annotations?: Record<string, string>; creationTimestamp?: string; deletionTimestamp?: string; generateName?: string; [k: string]: unknown }
  spec?: Record<string, unknown>
  status?: Record<string, unknown>
  [k: string]: unknown
}

export type WatchType = 'ADDED' | 'MODIFIED' | 'DELETED'
export interface StoredEvent { rv: number; resource: string; namespace: string; type: WatchType; object: KubeObject }

/** A `Status` body as the API server answers failures (meta/v1 Status). */
export function status(code: number, reason: string, message: string, details?: Record<string, unknown>) {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, ...(details ? { details } : {}), code }
}

export class KubeError extends Error {
  constructor(readonly code: number, readonly reason: string, message: string, readonly details?: Record<string, unknown>) {
    super(message)
  }

  body() {
    return status(this.code, this.reason, this.message, this.details)
  }
}

/** Equality-based and set-based label selectors (`a=b,c!=d,e in (x,y),f,!g`). */
export function matchesSelector(labels: Record<string, string> | undefined, selector: string | null | undefined): boolean {
  if (!selector) return true
  const l = labels ?? {}
  const terms = selector.match(/([^,(]+(\([^)]*\))?)/g) ?? []
  return terms.every((raw) => {
    const term = raw.trim()
    let m = /^(\S+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(term)
    if (m) {
      const values = m[3]!.split(',').map((v) => v.trim())
      const has = Object.hasOwn(l, m[1]!) && values.includes(l[m[1]!]!)
      return m[2] === 'in' ? has : !has
    }
    m = /^([^!=]+)(==|=|!=)(.*)$/.exec(term)
    if (m) return m[2] === '!=' ? l[m[1]!.trim()] !== m[3]!.trim() : l[m[1]!.trim()] === m[3]!.trim()
    if (term.startsWith('!')) return !Object.hasOwn(l, term.slice(1))
    return Object.hasOwn(l, term)
  })
}

const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/

export class ObjectStore {
  #rv = 100
  #compactedBefore = 0
  readonly #objects = new Map<string, KubeObject>()
  readonly #history: StoredEvent[] = []
  readonly #listeners = new Set<(e: StoredEvent) => void>()

  get resourceVersion(): number {
    return this.#rv
  }

  /** Drops the history: a watch from any earlier resourceVersion now gets 410 Gone. */
  compact(): void {
    this.#compactedBefore = this.#rv + 1
    this.#history.length = 0
  }

  get compactedBefore(): number {
    return this.#compactedBefore
  }

  onEvent(listener: (e: StoredEvent) => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  list(resource: string, namespace: string, selector?: string | null): KubeObject[] {
    return [...this.#objects.entries()]
      .filter(([k, o]) => k.startsWith(`${resource}/${namespace}/`) && matchesSelector(o.metadata.labels, selector))
      .map(([, o]) => structuredClone(o))
  }

  get(resource: string, namespace: string, name: string): KubeObject {
    const o = this.#objects.get(`${resource}/${namespace}/${name}`)
    if (!o) throw new KubeError(404, 'NotFound', `${resource} "${name}" not found`, { name, kind: resource })
    return structuredClone(o)
  }

  find(resource: string, namespace: string, name: string): KubeObject | undefined {
    const o = this.#objects.get(`${resource}/${namespace}/${name}`)
    return o ? structuredClone(o) : undefined
  }

  create(resource: string, namespace: string, body: KubeObject): KubeObject {
    if (resource === 'secrets') body = secretData(body)
    const meta = body.metadata ?? ({} as KubeObject['metadata'])
    if (!meta.name && meta.generateName) meta.name = `${meta.generateName}${randomUUID().slice(0, 5)}`
    validate(resource, body)
    const key = `${resource}/${namespace}/${meta.name}`
    if (this.#objects.has(key)) throw new KubeError(409, 'AlreadyExists', `${resource} "${meta.name}" already exists`, { name: meta.name, kind: resource })
    const obj: KubeObject = { ...structuredClone(body), metadata: { ...structuredClone(meta), namespace, uid: randomUUID(), creationTimestamp: new Date().toISOString() } }
    return this.#put(resource, namespace, obj, 'ADDED')
  }

  /** PUT semantics: a stale metadata.resourceVersion is 409 Conflict. */
  replace(resource: string, namespace: string, name: string, body: KubeObject): KubeObject {
    const current = this.get(resource, namespace, name)
    const rv = body.metadata?.resourceVersion
    if (rv !== undefined && rv !== current.metadata.resourceVersion) {
      throw new KubeError(409, 'Conflict', `Operation cannot be fulfilled on ${resource} "${name}": the object has been modified; please apply your changes to the latest version and try again`, { name, kind: resource })
    }
    if (resource === 'secrets') body = secretData(body)
    validate(resource, body)
    if (resource === 'pods') body = podUpdate(current, body)
    const obj: KubeObject = { ...structuredClone(body), metadata: { ...structuredClone(body.metadata), namespace, name, uid: current.metadata.uid, creationTimestamp: current.metadata.creationTimestamp } }
    return this.#put(resource, namespace, obj, 'MODIFIED')
  }

  /** Applies `change` to the stored object (the fake's own writes: status, deletion, labels). */
  update(resource: string, namespace: string, name: string, change: (o: KubeObject) => void): KubeObject | undefined {
    const current = this.find(resource, namespace, name)
    if (!current) return undefined
    change(current)
    return this.#put(resource, namespace, current, 'MODIFIED')
  }

  remove(resource: string, namespace: string, name: string): KubeObject {
    const current = this.get(resource, namespace, name)
    this.#objects.delete(`${resource}/${namespace}/${name}`)
    current.metadata.resourceVersion = String(++this.#rv)
    this.#emit({ rv: this.#rv, resource, namespace, type: 'DELETED', object: current })
    return structuredClone(current)
  }

  /** Events after `rv` (exclusive) for a resource in a namespace. */
  since(resource: string, namespace: string, rv: number): StoredEvent[] {
    return this.#history.filter((e) => e.rv > rv && e.resource === resource && e.namespace === namespace)
  }

  #put(resource: string, namespace: string, obj: KubeObject, type: WatchType): KubeObject {
    obj.metadata.resourceVersion = String(++this.#rv)
    this.#objects.set(`${resource}/${namespace}/${obj.metadata.name}`, obj)
    this.#emit({ rv: this.#rv, resource, namespace, type, object: structuredClone(obj) })
    return structuredClone(obj)
  }

  #emit(e: StoredEvent): void {
    this.#history.push(e)
    if (this.#history.length > 5000) this.#history.splice(0, 1000)
    for (const l of this.#listeners) l(e)
  }
}

/** What the real API server's validation refuses that corral could get wrong: 422 Invalid. */
function validate(resource: string, body: KubeObject): void {
  const causes: { reason: string; message: string; field: string }[] = []
  const name = body.metadata?.name
  if (!name) causes.push({ reason: 'FieldValueRequired', message: 'Required value: name or generateName is required', field: 'metadata.name' })
  else if (!NAME.test(name) || (resource !== 'secrets' && name.length > 63 && resource === 'pods')) {
    causes.push({ reason: 'FieldValueInvalid', message: `Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'`, field: 'metadata.name' })
  }
  for (const [k, v] of Object.entries(body.metadata?.labels ?? {})) {
    if (typeof v !== 'string' || v.length > 63 || !LABEL_VALUE.test(v)) causes.push({ reason: 'FieldValueInvalid', message: `Invalid value: "${String(v)}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.'`, field: `metadata.labels: ${k}` })
  }
  if (resource === 'pods') {
    const containers = (body.spec?.containers ?? []) as { name?: string; image?: string }[]
    if (containers.length === 0) causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: 'spec.containers' })
    containers.forEach((c, i) => {
      if (!c.image) causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: `spec.containers[${i}].image` })
    })
  }
  if (causes.length > 0) {
    const kind = body.kind ?? resource
    throw new KubeError(422, 'Invalid', `${kind} "${name ?? ''}" is invalid: ${causes.map((c) => `${c.field}: ${c.message}`).join(', ')}`, { name, kind, causes })
  }
}

/** The API server folds a Secret's write-only `stringData` into `data` (base64) and drops it. */
function secretData(body: KubeObject): KubeObject {
  const { stringData, ...rest } = body as KubeObject & { stringData?: Record<string, string>; data?: Record<string, string> }
  const data: Record<string, string> = { ...(rest.data as Record<string, string> | undefined) }
  for (const [k, v] of Object.entries(stringData ?? {})) data[k] = Buffer.from(v, 'utf8').toString('base64')
  return { ...rest, data }
}

/**
 * A PUT of a pod: `status` is the kubelet's (a write to the main resource leaves it as it is), and
 * the spec may not change but for a few fields (metadata, labels and annotations may): 422 like
 * the API server's "pod updates may not change fields other than …".
 */
function podUpdate(current: KubeObject, body: KubeObject): KubeObject {
  const shape = (o: KubeObject) => JSON.stringify({
    containers: ((o.spec?.containers ?? []) as { name?: string; command?: string[] }[]).map((c) => [c.name, c.command]),
    volumes: ((o.spec?.volumes ?? []) as { name?: string }[]).map((v) => v.name),
  })
  if (shape(current) !== shape(body)) {
    const name = current.metadata.name
    throw new KubeError(422, 'Invalid', `Pod "${name}" is invalid: spec: Forbidden: pod updates may not change fields other than \`spec.containers[*].image\`, \`spec.initContainers[*].image\`, \`spec.activeDeadlineSeconds\`, \`spec.tolerations\` (only additions to existing tolerations), \`spec.terminationGracePeriodSeconds\` (allow it to be set to 1 if it was previously negative)`, { name, kind: 'Pod', causes: [{ reason: 'FieldValueForbidden', message: 'pod updates may not change fields', field: 'spec' }] })
  }
  return { ...body, status: current.status, spec: { ...(body.spec ?? {}), nodeName: current.spec?.nodeName } }
}
