// What an MCP server answers, as the agent sees it: the entries of tools/list, resources/list,
// resources/templates/list and prompts/list results are cut to those the policy allows, in a JSON
// body (buffered whole, up to the inspection limit) and in an SSE stream (event by event, never
// held past its end). A body or event the filter cannot read cuts the response (fail closed).
import { StringDecoder } from 'node:string_decoder'
import { Transform, type TransformCallback } from 'node:stream'
import { parseStrictJson, type McpListKind, type McpServerPolicy } from '../../policy/index.js'

const LIST_KEYS: readonly McpListKind[] = ['tools', 'resources', 'resourceTemplates', 'prompts']

export class McpUnreadable extends Error {
  readonly code = 'MCP_UNREADABLE'
}

/** Counts what the filter removed (the row's `detail.mcp_filtered`). */
export interface FilterTally {
  removed: number
}

/**
 * Filters one JSON-RPC message or batch. List results are recognised by their shape (a result
 * whose `tools`, `resources`, `resourceTemplates` or `prompts` is an array), so a list answered
 * on a GET stream or replayed after a reconnect is cut like one answered to its POST.
 */
export function filterMessages(value: unknown, server: McpServerPolicy, tally: FilterTally): unknown {
  if (Array.isArray(value)) return value.map((v) => filterMessages(v, server, tally))
  if (!value || typeof value !== 'object') throw new McpUnreadable('a message that is not a JSON-RPC object')
  const msg = value as Record<string, unknown>
  const result = msg.result
  if (!result || typeof result !== 'object' || Array.isArray(result)) return value
  let out: Record<string, unknown> | undefined
  for (const key of LIST_KEYS) {
    const list = (result as Record<string, unknown>)[key]
    if (!Array.isArray(list)) continue
    const kept = list.filter((item) => server.listed(key, item))
    if (kept.length === list.length) continue
    tally.removed += list.length - kept.length
    out ??= { ...(result as Record<string, unknown>) }
    out[key] = kept
  }
  return out ? { ...msg, result: out } : value
}

/** A whole JSON body, filtered at its end; past `limit` bytes it is unreadable. */
export class JsonBodyFilter extends Transform {
  readonly #chunks: Buffer[] = []
  #size = 0

  constructor(
    private readonly server: McpServerPolicy,
    private readonly tally: FilterTally,
    private readonly limit: number,
  ) {
    super()
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.#size += chunk.length
    if (this.#size > this.limit) return cb(new McpUnreadable(`an MCP response body over ${this.limit} bytes cannot be filtered`))
    this.#chunks.push(chunk)
    cb()
  }

  override _flush(cb: TransformCallback): void {
    const text = Buffer.concat(this.#chunks, this.#size).toString('utf8')
    if (text.trim() === '') return cb()
    const parsed = parseStrictJson(text)
    if (!parsed.ok) return cb(new McpUnreadable(`an MCP response body that is not JSON (${parsed.message})`))
    try {
      const before = this.tally.removed
      const out = filterMessages(parsed.value, this.server, this.tally)
      cb(null, this.tally.removed === before ? text : JSON.stringify(out))
    } catch (err) {
      cb(err as Error)
    }
  }
}

/**
 * An SSE stream, event by event (WHATWG event-stream framing: lines end in CRLF, LF or CR; a blank
 * line ends an event). An event's data must be a JSON-RPC message (or empty, as a priming event
 * is); anything else cuts the stream. Events the filter does not change pass as they came.
 */
export class SseFilter extends Transform {
  readonly #decoder = new StringDecoder('utf8')
  #buf = ''
  #lines: string[] = []
  #eventSize = 0

  constructor(
    private readonly server: McpServerPolicy,
    private readonly tally: FilterTally,
    private readonly limit: number,
  ) {
    super()
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.#buf += this.#decoder.write(chunk)
    let out = ''
    try {
      let start = 0
      for (;;) {
        const cr = this.#buf.indexOf('\r', start)
        const lf = this.#buf.indexOf('\n', start)
        const end = cr < 0 ? lf : lf < 0 ? cr : Math.min(cr, lf)
        if (end < 0) break
        // A CR at the end of what arrived may be the first half of a CRLF.
        if (end === cr && end === this.#buf.length - 1) break
        const line = this.#buf.slice(start, end)
        start = end + (end === cr && this.#buf[end + 1] === '\n' ? 2 : 1)
        out += this.#line(line)
      }
      this.#buf = this.#buf.slice(start)
      if (this.#buf.length + this.#eventSize > this.limit) throw new McpUnreadable(`an SSE event over ${this.limit} bytes cannot be filtered`)
    } catch (err) {
      return cb(err as Error)
    }
    cb(null, out)
  }

  override _flush(cb: TransformCallback): void {
    // An event without its blank line at the end of the stream is discarded, as a client would.
    cb()
  }

  #line(line: string): string {
    if (line !== '') {
      this.#lines.push(line)
      this.#eventSize += line.length + 1
      return ''
    }
    const lines = this.#lines
    this.#lines = []
    this.#eventSize = 0
    if (lines.length === 0) return '\n'
    return this.#event(lines)
  }

  #event(lines: string[]): string {
    const data: string[] = []
    for (const l of lines) {
      const colon = l.indexOf(':')
      const field = colon < 0 ? l : l.slice(0, colon)
      if (field !== 'data') continue
      const v = colon < 0 ? '' : l.slice(colon + 1)
      data.push(v.startsWith(' ') ? v.slice(1) : v)
    }
    const raw = `${lines.join('\n')}\n\n`
    const text = data.join('\n')
    if (data.length === 0 || text.trim() === '') return raw
    const parsed = parseStrictJson(text)
    if (!parsed.ok) throw new McpUnreadable(`an SSE event whose data is not JSON (${parsed.message})`)
    const before = this.tally.removed
    const out = filterMessages(parsed.value, this.server, this.tally)
    if (this.tally.removed === before) return raw
    const kept = lines.filter((l) => !(l === 'data' || l.startsWith('data:')))
    return `${[...kept, `data: ${JSON.stringify(out)}`].join('\n')}\n\n`
  }
}
