// How a scripted reply reaches the client: server-sent events on an HTTP response (the framing each
// provider uses) or JSON text frames on a WebSocket (the Responses API's socket mode). Every payload
// is written in two pieces with a pause, so the client's parser sees events split across reads as on
// a real network. A reply marked `cut` drops the connection part-way, without the stream's end event.
import type http from 'node:http'
import type { WebSocket } from 'ws'

export interface Channel {
  /** One event: its SSE `event:` name (null: a `data:`-only stream) and its JSON payload. */
  event(name: string | null, data: unknown): Promise<void>
  /** A raw SSE line such as `data: [DONE]`; a WebSocket has no such thing and skips it. */
  raw(text: string): Promise<void>
  /** Drop the connection without a proper end. */
  cut(): void
}

/** Thrown by a channel that was cut on purpose, so the writer stops. */
export class CutStream extends Error {}

export interface SseOptions {
  /** Gemini's stream separates events with CRLF pairs. */
  crlf?: boolean
}

export function sseChannel(res: http.ServerResponse, opts: SseOptions = {}): Channel {
  const end = opts.crlf ? '\r\n\r\n' : '\n\n'
  const send = async (payload: string): Promise<void> => {
    if (res.destroyed) throw new CutStream('the client went away')
    const cut = Math.max(1, Math.floor(payload.length / 2))
    res.write(payload.slice(0, cut))
    await new Promise((r) => setImmediate(r))
    if (res.destroyed) throw new CutStream('the client went away')
    res.write(payload.slice(cut))
  }
  return {
    event: (name, data) => send(`${name === null ? '' : `event: ${name}\n`}data: ${JSON.stringify(data)}${end}`),
    raw: (text) => send(`${text}${end}`),
    cut: () => res.destroy(),
  }
}

export function socketChannel(ws: WebSocket): Channel {
  return {
    event: async (_name, data) => {
      if (ws.readyState !== ws.OPEN) throw new CutStream('the socket closed')
      await new Promise<void>((resolve, reject) => ws.send(JSON.stringify(data), (err) => (err ? reject(err) : resolve())))
    },
    raw: async () => {},
    cut: () => ws.terminate(),
  }
}

/** A channel that cuts the connection instead of sending its `after`-th event. */
export function cutAfter(inner: Channel, after: number): Channel {
  let sent = 0
  const gate = (): void => {
    if (sent++ >= after) {
      inner.cut()
      throw new CutStream('cut by the script')
    }
  }
  return {
    event: async (name, data) => {
      gate()
      await inner.event(name, data)
    },
    raw: async (text) => {
      gate()
      await inner.raw(text)
    },
    cut: () => inner.cut(),
  }
}

/** Splits text into pieces of `size` characters (at least one piece, maybe empty). */
export function pieces(text: string, size: number): string[] {
  const out: string[] = []
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size))
  return out.length > 0 ? out : ['']
}
