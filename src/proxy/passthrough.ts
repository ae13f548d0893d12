// SNI passthrough: a CONNECT whose target a `passthrough: true` rule names (certificate-pinned
// clients) is not intercepted. The proxy reads the ClientHello without consuming it
// (read-tls-client-hello), requires its SNI to name the CONNECT target, dials the target through
// the address guard, and splices bytes both ways without decrypting. One row per tunnel: the
// rule's capability, `detail.passthrough`, the SNI, bytes each way and the duration, written when
// both sides have closed; a refusal (no SNI, an SNI that differs from the target, a refused
// address) is a deny row and the connection is closed, since after `200` there is no HTTP left
// to answer in (docs/proxy.md "SNI passthrough").
import type { Socket } from 'node:net'
import { getExtensionData, readTlsClientHello } from 'read-tls-client-hello'
import { destinationRefusal } from '../net/index.js'
import type { RuleMatch } from '../policy/index.js'
import type { TokenCheck } from '../secrets/index.js'
import { normalizeHost } from './ca.js'
import { DecisionContext, attributeToken, deny, withFields } from './decision.js'
import { terminal } from './phases/terminal.js'
import type { ProxyCore } from './request-state.js'
import type { ActiveWorkspace } from './workspaces.js'

/**
 * Takes the CONNECT when the workspace's policy has a passthrough rule for its target (true: the
 * tunnel is handled, and its row written, here); false leaves it to be intercepted.
 */
export async function passthroughTunnel(core: ProxyCore, socket: Socket, head: Buffer, target: { host: string; port: number }, check: TokenCheck): Promise<boolean> {
  if (!check.ok) return false
  const through = await passthroughRule(core, check.claims.org_id, check.claims.workspace_id, target)
  if (!through) return false
  await passthrough(core, socket, head, target, through.match, check, through.ws)
  return true
}

/** The workspace's `passthrough: true` rule for this CONNECT target, if any (else the tunnel is intercepted). */
export async function passthroughRule(core: ProxyCore, orgId: string, workspaceId: string, target: { host: string; port: number }): Promise<{ match: RuleMatch; ws: ActiveWorkspace } | undefined> {
  // A lookup that fails (the store away) leaves the tunnel intercepted: its requests then get the
  // phases' answer (internal_error, 503) and their rows, which a CONNECT cannot carry.
  let activation
  try {
    activation = await core.workspaces.get(orgId, workspaceId)
  } catch {
    return undefined
  }
  if (!activation.ok || activation.workspace.policy.kind !== 'ok') return undefined
  const host = target.host.includes(':') ? `[${target.host}]` : target.host
  const match = activation.workspace.policy.policy.passthrough(target.port === 443 ? host : `${host}:${target.port}`)
  return match ? { match, ws: activation.workspace } : undefined
}

export async function passthrough(core: ProxyCore, socket: Socket, head: Buffer, target: { host: string; port: number }, match: RuleMatch, check: Extract<TokenCheck, { ok: true }>, ws: ActiveWorkspace): Promise<void> {
  const ctx = new DecisionContext({ destination: target.host, method: 'CONNECT', path: '' })
  attributeToken(ctx, check)
  const r = ws.record
  ctx.attribution = withFields(ctx.attribution, ctx.attribution.org_id, r.creator_user_id, undefined, undefined, r.role, r.provider)
  ctx.capability = match.capability
  ctx.match = match
  ctx.detail.passthrough = true
  const refuse = async (reason: Parameters<typeof deny>[0], detail: Record<string, unknown>): Promise<void> => {
    ctx.denial = deny(reason, { passthrough: true, ...detail })
    await terminal(core, ctx)
    socket.destroy()
  }
  socket.write('HTTP/1.1 200 Connection Established\r\n\r\n')
  if (head.length) socket.unshift(head)
  let sni: string | undefined
  try {
    const hello = await readTlsClientHello(socket)
    const name = getExtensionData(hello, 'server_name')?.serverName
    sni = name ? normalizeHost(name) : undefined
  } catch {
    return refuse('no_match', { message: 'a passthrough tunnel must begin with a TLS ClientHello' })
  }
  if (sni === undefined) return refuse('no_match', { message: 'a passthrough tunnel needs the ClientHello to name its host (SNI)' })
  if (sni !== target.host) return refuse('no_match', { sni: sni.slice(0, 253), message: 'the ClientHello names another host (SNI) than the CONNECT target' })
  ctx.detail.sni = sni
  let upstream: Socket
  try {
    upstream = await core.upstream.dialRaw(target.host, target.port, match.allowPrivate)
  } catch (err) {
    const refused = destinationRefusal(err)
    if (refused) return refuse('destination_private', { address: refused.address, port: refused.port })
    ctx.detail.upstream_error = (err as { code?: string })?.code === 'ECONNREFUSED' ? 'connection_refused' : 'error'
    await terminal(core, ctx)
    socket.destroy()
    return
  }
  await splice(socket, upstream, ctx, core.limits.idleTimeoutMs)
  await terminal(core, ctx)
}

/** Both ways until both sides closed; counts bytes. Half-closes are relayed (a TLS close_notify and FIN). */
function splice(client: Socket, upstream: Socket, ctx: DecisionContext, idleMs: number): Promise<void> {
  return new Promise((resolve) => {
    let up = 0
    let down = 0
    let clean = true
    client.on('data', (c: Buffer) => {
      up += c.length
      if (!upstream.write(c)) client.pause()
    })
    upstream.on('data', (c: Buffer) => {
      down += c.length
      if (!client.write(c)) upstream.pause()
    })
    upstream.on('drain', () => client.resume())
    client.on('drain', () => upstream.resume())
    client.once('end', () => upstream.end())
    upstream.once('end', () => client.end())
    const fail = (): void => {
      clean = false
      client.destroy()
      upstream.destroy()
    }
    client.on('error', fail)
    upstream.on('error', fail)
    let closed = 0
    const onClose = (): void => {
      if (++closed < 2) return
      ctx.detail.bytes_up = up
      ctx.detail.bytes_down = down
      ctx.detail.duration_ms = ctx.latencyMs()
      ctx.responseComplete = clean
      resolve()
    }
    client.once('close', onClose)
    upstream.once('close', onClose)
    // Silence both ways for the idle timeout ends the tunnel (like an intercepted one).
    client.setTimeout(idleMs, fail)
    upstream.setTimeout(idleMs, fail)
    // readTlsClientHello paused the socket; the ClientHello it read is back at the front.
    client.resume()
  })
}
