// Phase response_headers, MCP step: the body of an MCP server's answer goes to the agent through
// the list filter (mcp/filter.ts): a JSON body or an SSE stream. Any other content type in a
// successful answer, or an encoding the filter cannot read, is refused: the agent gets a 502 and
// none of its bytes (fail closed). Error answers (4xx, 5xx) carry no MCP result and pass.
import { pipeline } from 'node:stream'
import type { PhaseOutcome } from '../decision.js'
import { JsonBodyFilter, McpUnreadable, SseFilter, type FilterTally } from '../mcp/filter.js'
import type { ProxyCore, RequestState } from '../request-state.js'

export function mcpResponse(core: ProxyCore, st: RequestState): PhaseOutcome {
  const x = st.mcp
  const r = st.response
  if (!x || !r) return undefined
  if (r.status < 200 || r.status >= 300 || r.status === 202 || r.status === 204) return undefined
  const type = first(r.headers['content-type']).split(';')[0]!.trim().toLowerCase()
  const encoding = first(r.headers['content-encoding']).trim().toLowerCase()
  const length = first(r.headers['content-length'])
  if (type === '' && length === '0') return undefined
  const filter =
    encoding !== '' && encoding !== 'identity'
      ? undefined
      : type === 'text/event-stream'
        ? new SseFilter(x.server, tallyOf(st), core.maxInspectBytes)
        : type === 'application/json'
          ? new JsonBodyFilter(x.server, tallyOf(st), core.maxInspectBytes)
          : undefined
  if (!filter) {
    if (r.direct) r.direct.destroy()
    else r.body.once('error', () => {}).destroy()
    st.ctx.detail.mcp_unreadable = encoding !== '' && encoding !== 'identity' ? `encoding ${encoding.slice(0, 40)}` : `content-type ${type.slice(0, 80) || 'none'}`
    throw new McpUnreadable('an MCP answer the proxy cannot read')
  }
  delete r.headers['content-length']
  const ctx = st.ctx
  filter.once('error', (err) => {
    if (err instanceof McpUnreadable) ctx.detail.mcp_unreadable = err.message
  })
  r.body = pipeline(r.body, filter, () => {})
  return undefined
}

function first(v: string | string[] | undefined): string {
  return (Array.isArray(v) ? v[0] : v) ?? ''
}

/** The filter's count, kept in the row's detail as it changes (the row is written when the body ends). */
function tallyOf(st: RequestState): FilterTally {
  const d = st.ctx.detail
  return {
    get removed() {
      return typeof d.mcp_filtered === 'number' ? d.mcp_filtered : 0
    },
    set removed(n: number) {
      d.mcp_filtered = n
    },
  }
}
