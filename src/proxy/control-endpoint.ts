// The control plane's endpoint inside the proxy: requests from a workspace to `corral.internal`
// (the agent's default CORRAL_EVENTS_URL, docs/agent.md) are answered here, after the capability
// token check, instead of going upstream. The handler (the workspace controller's agent-events
// module) is registered per audit sink — the one object `serve` shares between the API and the
// proxy — so several serves in one process (tests) never see each other's handler.
// These requests are callbacks to the control plane, not outbound traffic: they write their own
// audit rows (agent events) instead of a policy_decision. A missing or bad token takes the normal
// path and is denied there (no_token / invalid_token) with its decision row.
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { AuditSink } from '../audit/event.js'
import type { Entry, ProxyCore } from './request-state.js'
import type { CapabilityClaims } from './token.js'

export const CONTROL_HOST = 'corral.internal'
/** Largest callback body accepted (an agent event). */
const MAX_BODY_BYTES = 1024 * 1024

export interface ControlReply {
  status: number
  body?: unknown
  headers?: Record<string, string>
}

export interface ControlEndpointHandler {
  handle(claims: CapabilityClaims, method: string, path: string, body: Buffer): Promise<ControlReply>
}

const handlers = new WeakMap<AuditSink, ControlEndpointHandler>()

export function registerControlEndpoint(audit: AuditSink, handler: ControlEndpointHandler): () => void {
  handlers.set(audit, handler)
  return () => {
    if (handlers.get(audit) === handler) handlers.delete(audit)
  }
}

/** True when the request was answered here; false to let the normal phases run (and deny). */
export async function serveControlEndpoint(core: ProxyCore, req: IncomingMessage, res: ServerResponse, entry: Entry, path: string): Promise<boolean> {
  const handler = handlers.get(core.audit)
  if (!handler) return false
  const auth = req.headers['proxy-authorization']
  const check = entry.tunnel ? await entry.tunnel.token : await core.tokens.check(Array.isArray(auth) ? auth[0] : auth)
  if (!check.ok) return false
  let reply: ControlReply
  try {
    const body = await readBody(req)
    reply = body === undefined
      ? { status: 413, body: { error: { code: 'payload_too_large', message: 'agent callback body over 1 MiB' } } }
      : await handler.handle(check.claims, (req.method ?? 'GET').toUpperCase(), path, body)
  } catch {
    reply = { status: 500, body: { error: { code: 'internal_error', message: 'the control plane failed to handle the callback' } } }
  }
  if (res.headersSent) return true
  const text = reply.body === undefined ? '' : JSON.stringify(reply.body)
  res.writeHead(reply.status, {
    ...(text ? { 'content-type': 'application/json' } : {}),
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    ...reply.headers,
  })
  res.end(text)
  return true
}

async function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req) {
    size += (chunk as Buffer).length
    if (size > MAX_BODY_BYTES) return undefined
    chunks.push(chunk as Buffer)
  }
  return Buffer.concat(chunks)
}
