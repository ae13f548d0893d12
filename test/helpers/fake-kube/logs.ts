// The fake kubelet's container logs and the API server's `GET …/pods/{name}/log` (API reference,
// "read log of the specified Pod"): what a container's real process writes to stdout and stderr is
// kept line by line with the time the line was read, as the kubelet's CRI log files keep it, and
// served as text/plain, chunked; `timestamps=true` prefixes each line with its time (RFC 3339, nine
// fractional digits, as the kubelet formats it); `sinceTime` keeps the lines at or after that time
// cut to the second, as the API server forwards it (the kubelet drops only those before it);
// `follow=true` goes on with new lines until the container ends or its pod goes. The node clock here has millisecond resolution, so lines written
// together share a timestamp, as they can on a real node. Hostile on request (LogHostility): a
// stream cut mid-line after some lines (the socket destroyed), or written slowly, each line in two
// pieces with a pause between.
import { EventEmitter } from 'node:events'
import type { ServerResponse } from 'node:http'
import type { Readable } from 'node:stream'
import { KubeError } from './store.js'

export interface LogEntry { time: bigint; stamp: string; text: string }

/** One container's output, in order; `done` once its process is over (or its pod is gone). */
export class ContainerLog {
  readonly entries: LogEntry[] = []
  done = false
  readonly #events = new EventEmitter()
  readonly #open = new Set<Readable>()

  /** Reads a stream of the container's process, a line at a time (the last one may lack its newline). */
  attach(stream: Readable): void {
    this.#open.add(stream)
    stream.setEncoding('utf8')
    let carry = ''
    stream.on('data', (chunk: string) => {
      const pieces = (carry + chunk).split(/(?<=\n)/)
      carry = pieces.at(-1)!.endsWith('\n') ? '' : pieces.pop()!
      for (const line of pieces) this.#push(line)
    })
    stream.once('close', () => {
      if (carry) this.#push(carry)
      this.#open.delete(stream)
      if (this.#open.size === 0) this.finish()
    })
  }

  finish(): void {
    if (this.done) return
    this.done = true
    this.#events.emit('done')
  }

  /** Calls `onEntry` for each new line and `onDone` at the end; returns the unsubscribe. */
  follow(onEntry: (e: LogEntry) => void, onDone: () => void): () => void {
    this.#events.on('entry', onEntry)
    this.#events.once('done', onDone)
    return () => {
      this.#events.off('entry', onEntry)
      this.#events.off('done', onDone)
    }
  }

  #push(text: string): void {
    const ms = Date.now()
    const entry = { time: BigInt(ms) * 1_000_000n, stamp: new Date(ms).toISOString().replace(/Z$/, '000000Z'), text }
    this.entries.push(entry)
    this.#events.emit('entry', entry)
  }
}

/**
 * `sinceTime` as the kubelet gets it: the API server parses it with Go's time.Parse(time.RFC3339, …)
 * (fractional seconds accepted) but forwards it to the kubelet as a metav1.Time query parameter,
 * formatted to the second — so lines from the start of that second come again.
 */
export function parseSinceTime(value: string): bigint {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$/.exec(value)
  const ms = m ? Date.parse(`${m[1]}${m[3]}`) : Number.NaN
  if (!m || Number.isNaN(ms)) throw new KubeError(400, 'BadRequest', `parsing time "${value}" as "2006-01-02T15:04:05Z07:00": cannot parse`)
  return BigInt(ms) * 1_000_000n
}

export interface LogHostility {
  /** The next `streams` log streams are cut (socket destroyed) mid-line after `afterLines` lines. */
  cut?: { streams: number; afterLines: number }
  /** Each line is written in two pieces with this pause between (0: at once). */
  slowMs?: number
}

/** Serves one log request from `log`; the response is registered in `open` while it streams. */
export function serveLog(log: ContainerLog, q: URLSearchParams, res: ServerResponse, hostile: LogHostility, open: Set<ServerResponse>): void {
  const since = q.get('sinceTime') ? parseSinceTime(q.get('sinceTime')!) : undefined
  const stamps = q.get('timestamps') === 'true'
  const follow = q.get('follow') === 'true'
  const cutAfter = hostile.cut && hostile.cut.streams > 0 ? hostile.cut.afterLines : undefined
  if (cutAfter !== undefined) hostile.cut!.streams--
  const slowMs = hostile.slowMs ?? 0
  res.writeHead(200, { 'content-type': 'text/plain', 'transfer-encoding': 'chunked' })
  open.add(res)
  let written = 0
  let chain = Promise.resolve()
  let off = (): void => {}
  const pause = (): Promise<void> => new Promise((r) => setTimeout(r, slowMs))
  const write = (e: LogEntry): void => {
    if (since !== undefined && e.time < since) return
    const line = stamps ? `${e.stamp} ${e.text}` : e.text
    chain = chain.then(async () => {
      if (res.destroyed) return
      if (cutAfter !== undefined && written >= cutAfter) {
        res.write(line.slice(0, Math.ceil(line.length / 2)))
        await pause()
        res.socket?.destroy()
        return
      }
      written++
      if (slowMs > 0) {
        const half = Math.ceil(line.length / 2)
        res.write(line.slice(0, half))
        await pause()
        if (!res.destroyed) res.write(line.slice(half))
      } else res.write(line)
    })
  }
  const end = (): void => {
    chain = chain.then(() => {
      if (!res.destroyed) res.end()
    })
  }
  for (const e of log.entries) write(e)
  if (!follow || log.done) end()
  else off = log.follow(write, end)
  res.once('close', () => {
    off()
    open.delete(res)
  })
}
