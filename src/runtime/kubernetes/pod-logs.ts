// The agent container's output, followed through the API server (docs/kubernetes.md "Runtime:
// agent output"): `GET /api/v1/namespaces/{ns}/pods/{name}/log?container=agent&follow=true&
// timestamps=true`, the request client-node's `Log` class makes, made here over node:https with
// the kubeconfig's own TLS and credentials (that class pipes the body and cannot tell a dropped
// connection from an end). Each line comes stamped with the time the node read it; after a drop
// (or an end while the agent still runs) the request is made again with `sinceTime` set to the last
// stamp delivered, and the lines at that very stamp already delivered are skipped — the API server
// keeps lines at or after `sinceTime`, and several lines can share a stamp — so nothing is
// delivered twice. A partial line at a drop is not delivered (it comes again, whole). Once the
// agent is over (the pod watch says so), one last read without `follow` picks up the tail; a pod
// that is gone (404) ends it. Bounded: retries back off while the agent runs, and stop with it.
import { request as httpRequest, type IncomingMessage, type RequestOptions } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { StringDecoder } from 'node:string_decoder'
import { setTimeout as sleep } from 'node:timers/promises'
import type { KubeClient } from './kube-client.js'

export interface PodLogTarget {
  namespace: string
  pod: string
  container: string
}

export interface FollowOptions {
  /** Resolves when the container is over (or its pod gone): then one last read, and the end. */
  over: Promise<unknown>
  /** Stops following at once (the driver closes). */
  signal?: AbortSignal
  /** Lines stamped before this time are not delivered (an agent adopted from another replica). */
  since?: Date
  /** Longest wait between two attempts after failures (default 2000 ms). */
  maxBackoffMs?: number
  /** How long a follow stream may stay open after the agent is over (default 2000 ms). */
  tailGraceMs?: number
  /** A line for the operator: the log cannot be read (401/403: given up), or keeps failing (said once). */
  warn?: (line: string) => void
}

const STAMP = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$/

/** An RFC 3339 time with up to nine fractional digits, in nanoseconds since the epoch; undefined when not one. */
export function stampNanos(stamp: string): bigint | undefined {
  const m = STAMP.exec(stamp)
  const ms = m ? Date.parse(`${m[1]}${m[3]}`) : Number.NaN
  if (!m || Number.isNaN(ms)) return undefined
  return BigInt(ms) * 1_000_000n + BigInt((m[2] ?? '').padEnd(9, '0'))
}

/** Where the follower is in the log: the last stamp delivered and how many lines carried it. */
export class LogCursor {
  #last: bigint | undefined
  #stamp: string | undefined
  #atLast = 0
  #skip = 0

  constructor(since?: Date) {
    if (since) {
      this.#stamp = since.toISOString()
      this.#last = stampNanos(this.#stamp)
    }
  }

  /** The `sinceTime` of the next request. */
  get sinceTime(): string | undefined {
    return this.#stamp
  }

  /** A new request starts: the lines at the last stamp it will send again are skipped. */
  resume(): void {
    this.#skip = this.#atLast
  }

  /** The text of the new lines among `block` (whole stamped lines), stamps removed. */
  take(block: string): string {
    let out = ''
    for (const line of block.split(/(?<=\n)/)) {
      if (!line) continue
      const space = line.indexOf(' ')
      const t = space > 0 ? stampNanos(line.slice(0, space)) : undefined
      if (t === undefined) {
        out += line // not stamped (an API server that ignores `timestamps`): delivered as is
        continue
      }
      if (this.#last !== undefined && t < this.#last) continue
      if (this.#last !== undefined && t === this.#last) {
        if (this.#skip > 0) {
          this.#skip--
          continue
        }
        this.#atLast++
      } else {
        this.#last = t
        this.#stamp = line.slice(0, space)
        this.#atLast = 1
        this.#skip = 0
      }
      out += line.slice(space + 1)
    }
    return out
  }
}

/** The API server's answer to a log request: the body stream, or a failure with its status code. */
async function openLog(client: KubeClient, t: PodLogTarget, query: URLSearchParams, signal: AbortSignal): Promise<IncomingMessage> {
  const cluster = client.config.getCurrentCluster()
  if (!cluster) throw Object.assign(new Error('no current cluster in the kubeconfig'), { code: 0 })
  const url = new URL(`${cluster.server.replace(/\/+$/, '')}/api/v1/namespaces/${encodeURIComponent(t.namespace)}/pods/${encodeURIComponent(t.pod)}/log?${query}`)
  const opts: RequestOptions & Record<string, unknown> = { method: 'GET', headers: {}, signal }
  await client.config.applyToHTTPSOptions(opts)
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(url, opts, resolve)
    req.once('error', reject)
    req.end()
  })
  if (res.statusCode === 200) return res
  let body = ''
  for await (const chunk of res) if (body.length < 4096) body += String(chunk)
  let message = body.slice(0, 300)
  try {
    message = (JSON.parse(body) as { message?: string }).message ?? message
  } catch {
    // not a Status body
  }
  throw Object.assign(new Error(`HTTP ${res.statusCode}: ${message}`), { code: res.statusCode })
}

/**
 * The container's output as text (whole lines, stamps removed), followed until `o.over` and then
 * read to its end. Never throws: a pod that is gone or a final read that fails ends it.
 */
// long-function: one loop holds the follow, the resume after a drop and the last read together
export async function* followPodLog(client: KubeClient, t: PodLogTarget, o: FollowOptions): AsyncGenerator<string> {
  const cursor = new LogCursor(o.since)
  let over = false
  let current: AbortController | undefined
  void o.over.finally(() => {
    over = true
    // A follow stream still open once the agent is over is cut after a grace: the last read follows.
    setTimeout(() => current?.abort(), o.tailGraceMs ?? 2000).unref()
  })
  let failures = 0
  for (;;) {
    if (o.signal?.aborted) return
    const last = over
    const query = new URLSearchParams({ container: t.container, follow: String(!last), timestamps: 'true' })
    if (cursor.sinceTime) query.set('sinceTime', cursor.sinceTime)
    cursor.resume()
    current = new AbortController()
    const stop = (): void => current?.abort()
    o.signal?.addEventListener('abort', stop, { once: true })
    let clean = false
    let carry = ''
    try {
      const res = await openLog(client, t, query, current.signal)
      const decoder = new StringDecoder('utf8')
      for await (const chunk of res) {
        const text = carry + decoder.write(chunk as Buffer)
        const cut = text.lastIndexOf('\n') + 1
        carry = text.slice(cut)
        const out = cut > 0 ? cursor.take(text.slice(0, cut)) : ''
        if (out) {
          failures = 0
          yield out
        }
      }
      clean = !current.signal.aborted
    } catch (err) {
      // 404: the pod is gone, its log with it. 401/403 will not heal: said once, given up. Anything
      // else is retried while the agent runs.
      const code = (err as { code?: unknown }).code
      if (code === 404) return
      if (code === 401 || code === 403) {
        o.warn?.(`kubernetes: cannot read the log of pod ${t.pod} (${(err as Error).message}): grant corral's Role "get" on pods/log; this agent's output is not shipped`)
        return
      }
      if (!last && failures === 2) o.warn?.(`kubernetes: following the log of pod ${t.pod} keeps failing (${(err as Error).message}); retrying`)
    } finally {
      o.signal?.removeEventListener('abort', stop)
    }
    if (last) {
      // The agent's last line may lack its newline: delivered once the stream ended cleanly.
      const tail = clean && carry ? cursor.take(`${carry}\n`) : ''
      if (tail) yield tail
      return
    }
    if (!clean) failures++
    const delay = Math.min(o.maxBackoffMs ?? 2000, 100 * 2 ** Math.min(failures, 5))
    await Promise.race([o.over, sleep(delay, undefined, { ref: false })])
  }
}
