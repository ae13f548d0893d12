// Transparent egress: connections the agent's tools made without knowing about the proxy. The
// sandbox steers every TCP connection it opens (and every DNS query) to its in-sandbox listener,
// which hands it to the proxy as a CONNECT to the address and port the tool dialled, marked with
// EGRESS_HEADER (src/runtime/sandbox-init.ts). Here such a CONNECT is turned back into a name:
// the address must be one this workspace's resolver handed out (src/dns/), the TLS ClientHello's
// SNI (or, for plain HTTP, the Host header: front.ts) must name the same name, and only then is
// the connection intercepted exactly as a CONNECT to that name and port. The address the tool
// dialled is never dialled: the upstream's address comes from the proxy's own resolution and the
// connect-time checks, as for every request. Anything else (SSH, raw TCP, a ClientHello without
// SNI, an address nobody handed out) is refused with one row naming destination and port.
//
// A CONNECT to RESOLVER_HOST:53 carries the workspace's DNS queries (framed as DNS over TCP). A
// CONNECT marked `udp` reports a UDP datagram the sandbox caught (it went nowhere): it is refused
// with one row naming destination and port, bounded per workspace (udp-reports.ts).
import type { IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'
import { getExtensionData, readTlsClientHello } from 'read-tls-client-hello'
import { DEFAULT_RESOLVER_LIMITS, WorkspaceResolver, isSynthetic, serveDnsStream, type LookupHooks, type LookupVerdict, type ResolverLimits } from '../dns/index.js'
import { compileDomain, type CompiledPolicy } from '../policy/index.js'
import type { TokenCheck } from '../secrets/index.js'
import { DecisionContext, attributeToken, deny, withFields, type PolicyDenial } from './decision.js'
import { andThen } from './maybe.js'
import { decisionRow, terminal } from './phases/terminal.js'
import type { ProxyCore } from './request-state.js'
import { recordThenRefuse } from './transport.js'
import { UdpReports } from './udp-reports.js'
import type { ActivationResult } from './workspaces.js'

/** The CONNECT target that carries DNS queries from the sandbox. */
export const RESOLVER_HOST = 'resolver.corral.internal'
/** Marks a CONNECT made by the sandbox's transparent listener for a connection it intercepted. */
export const EGRESS_HEADER = 'x-corral-egress'

/** What front.ts does with a CONNECT after this module looked at it. */
export type EgressVerdict =
  /** Not transparent egress: an ordinary CONNECT. */
  | undefined
  /** Answered here (DNS, or refused with its row). */
  | 'handled'
  /** Intercept as a CONNECT to `host:port`; `plain` when the client speaks HTTP without TLS. */
  | { host: string; port: number; plain: boolean }

const HTTP_METHOD = /^[A-Z]{3,10} /

export class TransparentEgress {
  readonly #core: ProxyCore
  readonly #limits: ResolverLimits
  readonly #resolvers = new Map<string, WorkspaceResolver>()
  readonly #udp = new UdpReports()

  constructor(core: ProxyCore) {
    this.#core = core
    this.#limits = { ...DEFAULT_RESOLVER_LIMITS, ...core.resolverLimits }
  }

  /** Drops a workspace's synthetic names (it was torn down in this proxy). */
  forget(workspaceId: string): void {
    this.#resolvers.delete(workspaceId)
    this.#udp.forget(workspaceId)
  }

  /** The workspace's resolver (its synthetic table), made on first use. */
  resolver(workspaceId: string): WorkspaceResolver {
    let r = this.#resolvers.get(workspaceId)
    if (!r) this.#resolvers.set(workspaceId, (r = new WorkspaceResolver(this.#limits)))
    return r
  }

  /**
   * Looks at a CONNECT whose token verified: the resolver's stream, a connection the sandbox
   * intercepted, or a CONNECT to a synthetic address (a tool that resolved through corral and then
   * used HTTPS_PROXY with the address). Everything else is an ordinary CONNECT (undefined).
   */
  async connect(req: IncomingMessage, target: { host: string; port: number }, check: TokenCheck, socket: Socket, head: Buffer): Promise<EgressVerdict> {
    const marked = req.headers[EGRESS_HEADER] === 'transparent'
    if (target.host === RESOLVER_HOST && target.port === 53) return this.#dns(check, socket, head)
    if (req.headers[EGRESS_HEADER] === 'udp' && check.ok) return this.#udpReport(check, target, socket)
    if (!marked && !isSynthetic(target.host)) return undefined
    if (!check.ok) return undefined
    const ws = await activation(this.#core, check)
    const name = isSynthetic(target.host) ? this.#resolvers.get(check.claims.workspace_id)?.table.nameOf(target.host) : undefined
    if (!name) {
      const ctx = this.#context(check, ws, target.host)
      ctx.denial = deny('no_match', { egress: 'transparent', port: target.port, message: 'the address was not handed out by this workspace\'s resolver: only names looked up through corral can be reached' })
      await recordThenRefuse(this.#core, ctx, socket, 403)
      return 'handled'
    }
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n')
    if (head.length) socket.unshift(head)
    const first = await firstBytes(socket, this.#core.limits.connectTimeoutMs)
    if (first !== undefined && first[0] === 0x16) {
      let sni: string | undefined
      try {
        sni = getExtensionData(await readTlsClientHello(socket), 'server_name')?.serverName?.toLowerCase().replace(/\.$/, '')
      } catch {
        sni = undefined
      }
      if (sni === name) return { host: name, port: target.port, plain: false }
      const detail = sni ? { message: 'the TLS server name differs from the name the address was resolved for', sni } : { message: 'a TLS ClientHello without a server name (SNI) cannot be matched to a name' }
      return this.#refuseOpen(check, ws, name, deny('no_match', { egress: 'transparent', port: target.port, ...detail }), socket)
    }
    if (first !== undefined && HTTP_METHOD.test(first.subarray(0, 11).toString('latin1'))) return { host: name, port: target.port, plain: true }
    const protocol = first === undefined ? 'none' : first.subarray(0, 4).toString('latin1') === 'SSH-' ? 'ssh' : 'unknown'
    return this.#refuseOpen(check, ws, name, deny('no_match', { egress: 'transparent', port: target.port, protocol, message: 'only HTTP and TLS (with SNI) connections can leave a workspace' }), socket)
  }

  /** A UDP datagram the sandbox caught: refused, with a row when the workspace's allowance has one. */
  async #udpReport(check: Extract<TokenCheck, { ok: true }>, target: { host: string; port: number }, socket: Socket): Promise<'handled'> {
    const workspaceId = check.claims.workspace_id
    const name = isSynthetic(target.host) ? this.#resolvers.get(workspaceId)?.table.nameOf(target.host) : undefined
    const suppressed = this.#udp.take(workspaceId, `${target.host}:${target.port}`)
    if (suppressed === undefined) {
      socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n')
      return 'handled'
    }
    const ctx = this.#context(check, await activation(this.#core, check), name ?? target.host)
    ctx.denial = deny('no_match', {
      egress: 'transparent', protocol: 'udp', port: target.port, ...(name ? { address: target.host } : {}), ...(suppressed > 0 ? { suppressed } : {}),
      message: 'UDP other than DNS to corral\'s resolver cannot leave a workspace',
    })
    await recordThenRefuse(this.#core, ctx, socket, 403)
    return 'handled'
  }

  /** The DNS phase: queries framed on the stream, answered by the workspace's resolver. */
  async #dns(check: TokenCheck, socket: Socket, head: Buffer): Promise<EgressVerdict> {
    if (!check.ok) return undefined
    const claims = check.claims
    const ws = await activation(this.#core, check)
    const policy = ws.ok && ws.workspace.policy.kind === 'ok' ? ws.workspace.policy.policy : undefined
    const hooks: LookupHooks = {
      decide: (name) => lookupVerdict(policy, name),
      allowed: async (name, capability) => {
        const ctx = this.#context(check, ws, name)
        ctx.phase = 'dns'
        ctx.method = ''
        ctx.capability = capability
        const row = decisionRow(ctx)
        row.policy_type = 'dns'
        row.detail = {}
        await this.#emit(row)
      },
    }
    socket.setTimeout(this.#core.limits.idleTimeoutMs, () => socket.destroy())
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n')
    if (head.length) socket.unshift(head)
    serveDnsStream(socket, this.resolver(claims.workspace_id), hooks)
    return 'handled'
  }

  /** Writes a dns row and waits until the sink has it; a refusal is counted, logged and thrown (the lookup fails). */
  async #emit(row: ReturnType<typeof decisionRow>): Promise<void> {
    try {
      await this.#core.audit.emit(row)
      this.#core.auditGate.accepted()
    } catch (err) {
      this.#core.counters.auditFailures++
      this.#core.auditGate.refused(err)
      this.#core.log.error({ err: { message: (err as Error)?.message } }, 'proxy: the audit sink refused a dns policy_decision row')
      throw err
    }
  }

  #context(check: TokenCheck, ws: ActivationResult, destination: string): DecisionContext {
    const ctx = new DecisionContext({ destination, method: 'CONNECT', path: '' })
    attributeToken(ctx, check)
    if (ws.ok) {
      const r = ws.workspace.record
      ctx.attribution = withFields(ctx.attribution, ctx.attribution.org_id, r.creator_user_id, undefined, undefined, r.role, r.provider)
    }
    return ctx
  }

  /** A refusal after the tunnel opened: the row, then the connection is closed (no HTTP to answer in). */
  async #refuseOpen(check: TokenCheck, ws: ActivationResult, name: string, denial: PolicyDenial, socket: Socket): Promise<'handled'> {
    const ctx = this.#context(check, ws, name)
    ctx.denial = denial
    await terminal(this.#core, ctx)
    socket.destroy()
    return 'handled'
  }
}

/** Whether a name is one the policy's allow rules name (any port, any method): the DNS phase's question. */
export function lookupVerdict(policy: CompiledPolicy | undefined, name: string): LookupVerdict {
  for (const cap of policy?.capabilities ?? []) {
    for (const rule of cap.rules) {
      for (const pattern of rule.domains) {
        if (compileDomain(pattern.replace(/:\d+$/, ''))(name)) return { allowed: true, capability: cap.name }
      }
    }
  }
  return { allowed: false }
}

function activation(core: ProxyCore, check: Extract<TokenCheck, { ok: true }>): Promise<ActivationResult> {
  return Promise.resolve(andThen(core.workspaces.get(check.claims.org_id, check.claims.workspace_id), (a) => a))
}

/** The first chunk the client sends, put back on the socket; undefined when it sends nothing in time. */
function firstBytes(socket: Socket, timeoutMs: number): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    const done = (b: Buffer | undefined) => {
      clearTimeout(timer)
      socket.off('readable', onReadable)
      socket.off('close', onClose)
      resolve(b)
    }
    const onReadable = () => {
      const chunk = socket.read() as Buffer | null
      if (chunk) {
        socket.unshift(chunk)
        done(chunk)
      }
    }
    const onClose = () => done(undefined)
    const timer = setTimeout(() => done(undefined), timeoutMs)
    socket.on('readable', onReadable)
    socket.once('close', onClose)
  })
}

/**
 * Plain HTTP the sandbox intercepted: the Host header must name the name the address was
 * resolved for (a request for another host on the same connection is refused, with its row).
 */
export function plainHostDisagrees(tunnel: { host: string }, req: IncomingMessage): PolicyDenial | undefined {
  const host = String(req.headers.host ?? '').toLowerCase().replace(/:\d+$/, '').replace(/\.$/, '')
  if (host === tunnel.host) return undefined
  return deny('no_match', { egress: 'transparent', message: 'the Host header differs from the name the address was resolved for', host })
}
