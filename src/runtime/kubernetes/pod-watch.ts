// The driver's view of its pods, kept from a watch rather than by polling (docs/kubernetes.md
// "Runtime: watches"): list once (its resourceVersion), watch from there, and on every end of the
// stream resume from the last resourceVersion seen; a `410 Gone` (the ERROR event the API server
// sends for a compacted version, or the status of the request) starts over with a fresh list.
// Every change is handed to `onChange`, including pods deleted while the watch was down (found
// missing by the re-list), so a pod deleted or evicted behind corral's back is noticed in seconds.
import type { V1Pod } from '@kubernetes/client-node'
import { statusCode, type KubeClient } from './kube-client.js'

export type PodChange = { type: 'ADDED' | 'MODIFIED' | 'DELETED'; pod: V1Pod }

export interface PodWatchOptions {
  namespace: string
  selector: string
  onChange: (change: PodChange) => void
  warn: (line: string) => void
  /** Longest wait between two attempts after failures (default 2000 ms). */
  maxBackoffMs?: number
}

export class PodWatch {
  readonly #client: KubeClient
  readonly #o: PodWatchOptions
  readonly #pods = new Map<string, V1Pod>()
  #rv: string | undefined
  #abort: AbortController | undefined
  #closed = false
  #failures = 0
  #timer: NodeJS.Timeout | undefined
  #synced: Promise<void> | undefined
  /** How many times the stream was (re)opened and re-listed (diagnostics, tests). */
  readonly stats = { watches: 0, lists: 0 }

  constructor(client: KubeClient, options: PodWatchOptions) {
    this.#client = client
    this.#o = options
  }

  /** Lists and starts watching; resolves after the first list. */
  start(): Promise<void> {
    this.#synced ??= this.#relist()
    return this.#synced
  }

  pods(): V1Pod[] {
    return [...this.#pods.values()]
  }

  get(name: string): V1Pod | undefined {
    return this.#pods.get(name)
  }

  async #relist(): Promise<void> {
    const list = await this.#client.core.listNamespacedPod({ namespace: this.#o.namespace, labelSelector: this.#o.selector })
    this.stats.lists++
    const seen = new Set<string>()
    for (const pod of list.items) {
      const name = pod.metadata?.name
      if (!name) continue
      seen.add(name)
      const known = this.#pods.get(name)
      this.#pods.set(name, pod)
      if (known?.metadata?.resourceVersion !== pod.metadata?.resourceVersion) this.#o.onChange({ type: known ? 'MODIFIED' : 'ADDED', pod })
    }
    for (const [name, pod] of [...this.#pods]) {
      if (seen.has(name)) continue
      this.#pods.delete(name)
      this.#o.onChange({ type: 'DELETED', pod })
    }
    this.#rv = list.metadata?.resourceVersion
    void this.#watch()
  }

  async #watch(): Promise<void> {
    if (this.#closed) return
    let gone = false
    const params = { labelSelector: this.#o.selector, resourceVersion: this.#rv, allowWatchBookmarks: true }
    this.stats.watches++
    this.#abort = await this.#client.watch.watch(`/api/v1/namespaces/${encodeURIComponent(this.#o.namespace)}/pods`, params, (type: string, obj: unknown) => {
      if (type === 'ERROR') {
        if ((obj as { code?: number }).code === 410) gone = true
        return
      }
      const pod = obj as V1Pod
      const rv = pod.metadata?.resourceVersion
      if (rv) this.#rv = rv
      if (type === 'BOOKMARK') return
      this.#failures = 0
      const name = pod.metadata?.name
      if (!name || (type !== 'ADDED' && type !== 'MODIFIED' && type !== 'DELETED')) return
      if (type === 'DELETED') this.#pods.delete(name)
      else this.#pods.set(name, pod)
      this.#o.onChange({ type, pod })
    }, (err: unknown) => {
      if (this.#closed) return
      if (statusCode(err) === 410) gone = true
      if (err && !gone) {
        this.#failures++
        if (this.#failures === 3) this.#o.warn(`kubernetes: the pod watch keeps failing (${(err as Error).message ?? String(err)}); retrying`)
      }
      this.#again(gone)
    })
  }

  /** The stream ended: resume from the last resourceVersion, or re-list after 410 Gone. */
  #again(gone: boolean): void {
    if (this.#closed) return
    const delay = this.#failures === 0 ? 0 : Math.min(this.#o.maxBackoffMs ?? 2000, 100 * 2 ** Math.min(this.#failures, 5))
    this.#timer = setTimeout(() => {
      this.#timer = undefined
      const next = gone ? this.#relist() : this.#watch()
      next.catch((err: unknown) => {
        this.#failures++
        if (this.#failures === 3) this.#o.warn(`kubernetes: listing pods failed (${(err as Error).message}); retrying`)
        this.#again(statusCode(err) === 410 || gone)
      })
    }, delay)
    this.#timer.unref()
  }

  close(): void {
    this.#closed = true
    if (this.#timer) clearTimeout(this.#timer)
    this.#abort?.abort()
  }
}
