// The state one request carries through the phases. Created by the front, read and filled by the
// phases, closed by the terminal phase.
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Readable } from 'node:stream'
import type { AuditSink } from '../contract/index.js'
import type { ResolverLimits } from '../dns/index.js'
import type { AdmissionResult, AuthPlacement, PolicyContext, PolicyRequest, TransformOutput } from '../policy/index.js'
import type { CredentialBroker, SecretsSource } from '../secrets/index.js'
import type { AgentCallbacks } from './agent-callback-handler.js'
import type { Budgets, Reservation } from './budgets.js'
import type { ResponseMeter } from './metering.js'
import type { DecisionContext } from './decision.js'
import type { AuditGate } from './audit-gate.js'
import type { ProxyLimits } from './limits.js'
import type { RowAllowance } from './row-allowance.js'
import type { TaskLiveness } from './task-liveness.js'
import type { CapabilityTokens, TokenCheck } from '../secrets/index.js'
import type { Upstream, UpstreamResponse } from './upstream.js'
import type { DirectBody } from './pooled-response.js'
import type { BodyScan, Scrubber } from './scrub.js'
import type { McpExchange } from './mcp/exchange.js'
import type { ActiveWorkspace, ActiveWorkspaces } from './workspaces.js'

/**
 * The request's "client gone" signal: `aborted`, and listeners of its one event, 'abort', which
 * fires at most once (so `once` is `on`). Not an EventEmitter: one per request, and an emitter's
 * construction and `once` wrappers cost more than the list it needs.
 */
export class ClientGone {
  aborted = false
  #listeners: (() => void)[] | undefined = undefined

  on(_event: 'abort', fn: () => void): this {
    ;(this.#listeners ??= []).push(fn)
    return this
  }

  once(event: 'abort', fn: () => void): this {
    return this.on(event, fn)
  }

  off(_event: 'abort', fn: () => void): this {
    const l = this.#listeners
    const i = l ? l.lastIndexOf(fn) : -1
    if (i >= 0) l!.splice(i, 1)
    return this
  }

  abort(): void {
    if (this.aborted) return
    this.aborted = true
    const l = this.#listeners
    this.#listeners = undefined
    if (l) for (const fn of l) fn()
  }
}

/** What the CONNECT front established for every request inside one tunnel. */
export interface TunnelContext {
  /** The CONNECT target (normalized hostname) and port: the only place requests in the tunnel go. */
  host: string
  port: number
  /** TLS SNI the client sent, normalized; undefined when it sent none. */
  sni?: string
  /** Token verification done once per tunnel, at CONNECT. */
  token: Promise<TokenCheck>
  /** The same check once `token` has settled, read without a promise per request. */
  checked?: TokenCheck
  /** Plain HTTP intercepted by the sandbox (transparent.ts): requests name `host` in their Host header. */
  plain?: boolean
  /** The last Host header found to name `host` (and the SNI): credential-injection.ts hostAgreesWithSni. */
  agreedHost?: string
  /** The entry every request of the tunnel shares, made by its first (front.ts). */
  entry?: Entry
}

/** Where a request entered: plain HTTP (absolute URI) or inside an intercepted tunnel. */
export interface Entry {
  scheme: 'http' | 'https'
  host: string
  port: number
  tunnel?: TunnelContext
  /** `scheme://host:port` of the upstream, made once per entry by the upstream phase. */
  origin?: string
}

/** Provider slug → where a minted credential goes (credential-injection.ts). */
export type PlacementLookup = (provider: string) => AuthPlacement | undefined

/** Where the proxy reports its own faults (serve's pino logger; console when run bare). */
export interface ProxyLog {
  error(obj: object, msg: string): void
  warn(obj: object, msg: string): void
}

/** Cheap counters for operators and benchmarks (no per-request logging). */
export interface ProxyCounters {
  tunnels: number
  requests: number
  /** Decision rows the audit sink refused (a bug or back-pressure); each is also logged. */
  auditFailures: number
  /** Connections closed at accept because maxConnections was reached. */
  connectionsRefused: number
  /** Transport violations (bytes that are not HTTP, oversized heads, timeouts) answered 400/408/431. */
  transportErrors: number
  /** Transport-violation rows only counted (rate limit), not written. */
  transportRowsSuppressed: number
  /** Faults caught by a socket handler's error boundary (that connection was closed). */
  handlerFaults: number
  /** Requests answered 503 because the store was unavailable inside the phases. */
  storeUnavailable: number
}

/** Everything the phases share for the process lifetime. */
export interface ProxyCore {
  tokens: CapabilityTokens
  /** Whether a task token's task is still live (task-liveness.ts); without it task tokens are not checked. */
  tasks?: TaskLiveness
  workspaces: ActiveWorkspaces
  audit: AuditSink
  upstream: Upstream
  secrets?: SecretsSource
  credentials?: CredentialBroker
  /** Provider slug → where a minted credential goes (src/policy/auth-providers.ts data). */
  placements?: PlacementLookup
  budgets?: Budgets
  /** Largest request body buffered for inspection; larger bodies that must be inspected are denied. */
  maxInspectBytes: number
  limits: ProxyLimits
  log: ProxyLog
  counters: ProxyCounters
  /** Closed while the audit log refuses rows: nothing is forwarded then (audit-gate.ts). */
  auditGate: AuditGate
  /** Rows of 407 challenges (CONNECT and plain HTTP): cheap to cause, so rate limited, apart from transport violations. */
  challengeRows: RowAllowance
  /** The handler of agent callbacks to `corral.internal` (agent-callbacks.ts); none → that host takes the phases. */
  agentCallbacks?: AgentCallbacks
  /** Limits of each workspace's resolver (transparent.ts); default DEFAULT_RESOLVER_LIMITS. */
  resolverLimits?: Partial<ResolverLimits>
}

/** The body the response_body phase relays: the upstream's, or its scrubbed view. */
export interface RelayedBody {
  /** A stream, or the pooled client's body read without one (pooled-response.ts). */
  src: Readable | DirectBody
  scrubber?: Scrubber
  /** The scan the relay applies to each chunk of `src` itself (an identity body: no stream in between). */
  scan?: BodyScan
  /**
   * The upstream's declared body length when the client's copy goes out chunked (a scanned body
   * loses its Content-Length): the relay sends the chunk that completes it with the end.
   */
  length?: number
}

export interface RequestState {
  readonly req: IncomingMessage
  readonly res: ServerResponse
  readonly entry: Entry
  readonly ctx: DecisionContext
  /** Fires 'abort' when the client leaves before its response is complete (cheaper than an AbortController per request). */
  readonly abort: ClientGone
  workspace?: ActiveWorkspace
  policyRequest?: PolicyRequest
  policyContext?: PolicyContext
  admission?: Exclude<AdmissionResult, { decision: 'deny' }>
  /** Request headers minus hop-by-hop and proxy headers (lowercase names). */
  headers: Record<string, string | string[]>
  /** Buffered body, when a phase needed it. */
  body?: Buffer
  /** Parsed JSON body from the body phase. */
  json?: unknown
  transformed?: TransformOutput
  /** Values the proxy injected (credentials, secret values): scrubbed from the response. */
  injected?: string[]
  /** Final body to send upstream when a body transform changed it. */
  outgoingBody?: Buffer
  /** Size in bytes of the request body as relayed upstream. */
  requestBytes: number
  /** Response bytes relayed to the client. */
  responseBytes: number
  responseStatus?: number
  /** The upstream's answer, set by the upstream phase; its body is relayed by the response phases. */
  response?: UpstreamResponse
  /** The body the response_body phase relays (the upstream's, or its scrubbed view), set by response_headers. */
  relayed?: RelayedBody
  reservation?: Reservation
  meter?: ResponseMeter
  /** The MCP exchange, when the matched rule's destination is an MCP server (phases/mcp-request.ts). */
  mcp?: McpExchange
  /** Set once the workspace slot and budgets were released (runner). */
  released?: boolean
  /** Set by the forward phase when a streamed body went past limits.maxBodyBytes. */
  bodyLimitHit?: boolean
  /**
   * Called by the forward phase when the upstream body has ended, before the client's response is
   * ended: records the row (durable) so no client sees a complete answer without it. False: the
   * row was refused, and the response is cut instead of completed.
   */
  beforeEnd?: (core: ProxyCore, st: RequestState) => Promise<boolean>
}

/**
 * A request's state with every field present from the start (unset ones undefined): the phases
 * fill in a dozen of them, and an object grown a field at a time reallocates its property store
 * as it grows; this one is made once, with room for all.
 */
export function newRequestState(req: IncomingMessage, res: ServerResponse, entry: Entry, ctx: DecisionContext, headers: Record<string, string | string[]>): RequestState {
  return {
    req, res, entry, ctx, abort: new ClientGone(), workspace: undefined, policyRequest: undefined, policyContext: undefined, admission: undefined,
    headers, body: undefined, json: undefined, transformed: undefined, injected: undefined, outgoingBody: undefined, requestBytes: 0, responseBytes: 0,
    responseStatus: undefined, response: undefined, relayed: undefined, reservation: undefined, meter: undefined, mcp: undefined, released: undefined,
    bodyLimitHit: undefined, beforeEnd: undefined,
  }
}
