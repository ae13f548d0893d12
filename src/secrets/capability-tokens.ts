// Capability tokens: what a workspace presents in `Proxy-Authorization: Bearer <token>`.
// Signing material like sealing, so it lives in src/secrets/: the control plane mints with it (the
// workspace lifecycle, `corral admin proxy-token`) and the proxy verifies with it; neither imports the other.
// A compact JWS (HS256) naming org, workspace and optionally task, with an expiry. The signing
// key lives in the store's settings so every proxy process on one database agrees; verification
// is pure CPU (no database round trip). A minted token is a bearer secret: it is never logged,
// audited or echoed back in a deny body.
//
// Scope (docs/security.md "Tokens with the narrowest scope"): a task token (with `task`) reaches
// the proxy while its task is live; a start-up token (`use: startup`, minted for a warm or
// dynamic pool member's agent before it has a task) reaches only the agent's task poll
// (`GET corral.internal/tasks/next`), once: its `jti` is the one the controller expects.
import { randomBytes, randomUUID } from 'node:crypto'
import { SignJWT, jwtVerify, errors as joseErrors } from 'jose'
import type { CapabilityClaims } from '../contract/index.js'

export const TOKEN_KEY_SETTING = 'proxy.capability_token_key'
const ISSUER = 'corral'
const AUDIENCE = 'corral-proxy'
const ALG = 'HS256'
/** Tolerated clock skew between the minting process and the verifying proxy. */
const CLOCK_TOLERANCE_S = 5

export type TokenCheck =
  | { ok: true; claims: CapabilityClaims }
  /** `expired` carries the claims of a correctly signed token past its expiry, for audit attribution only. */
  | { ok: false; reason: 'no_token' | 'invalid_token'; expired?: { org_id: string; workspace_id: string } }

/** The slice of the store's settings this module needs (get + atomic set-if-absent). */
export interface TokenKeySettings {
  setIfAbsent(key: string, value: string): Promise<unknown>
  get(key: string): Promise<string | undefined | null>
}

/** Reads the shared signing key, creating it once; concurrent first starts agree through setIfAbsent. */
export async function loadTokenKey(settings: TokenKeySettings): Promise<Uint8Array> {
  await settings.setIfAbsent(TOKEN_KEY_SETTING, randomBytes(32).toString('base64url'))
  const stored = await settings.get(TOKEN_KEY_SETTING)
  if (!stored) throw new Error('capability token key missing from settings after setIfAbsent')
  const key = Buffer.from(stored, 'base64url')
  if (key.length < 32) throw new Error('capability token key in settings is shorter than 256 bits')
  return new Uint8Array(key)
}

/** Verified tokens kept so a client that opens many tunnels pays the signature check once. */
const VERIFIED_CACHE_MAX = 10_000

export class CapabilityTokens {
  readonly #key: Uint8Array
  // token → its verified claims. Only successful checks are kept, and a hit is re-checked against
  // `exp` (with the same tolerance) so an expiring token falls back to the full check, which
  // gives the expired outcome. The cache holds nothing the process did not already hold.
  readonly #verified = new Map<string, CapabilityClaims>()

  constructor(key: Uint8Array) {
    this.#key = key
  }

  async mint(subject: { org_id: string; workspace_id: string; task_id?: string }, ttlSeconds: number,
    opts: { startup?: boolean } = {}): Promise<{ token: string; expires_at: string; jti?: string }> {
    if (!(ttlSeconds > 0)) throw new RangeError('token ttl must be positive')
    if (opts.startup && subject.task_id) throw new RangeError('a start-up token names no task')
    const exp = Math.floor(Date.now() / 1000) + Math.ceil(ttlSeconds)
    const claims: Record<string, string> = { org: subject.org_id, ws: subject.workspace_id }
    if (subject.task_id) claims.task = subject.task_id
    const jti = opts.startup ? randomUUID() : undefined
    if (opts.startup) claims.use = 'startup'
    let jwt = new SignJWT(claims)
    if (jti) jwt = jwt.setJti(jti)
    const token = await jwt
      .setProtectedHeader({ alg: ALG, typ: 'corral-cap+jwt' })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setIssuedAt()
      .setExpirationTime(exp)
      .sign(this.#key)
    return { token, expires_at: new Date(exp * 1000).toISOString(), ...(jti ? { jti } : {}) }
  }

  /** Checks a `Proxy-Authorization` header value. Never throws. */
  async check(header: string | undefined): Promise<TokenCheck> {
    const token = bearer(header)
    if (token === undefined) return { ok: false, reason: 'no_token' }
    const cached = this.#verified.get(token)
    if (cached && cached.exp + CLOCK_TOLERANCE_S > Date.now() / 1000) return { ok: true, claims: cached }
    try {
      const { payload } = await jwtVerify(token, this.#key, {
        issuer: ISSUER,
        audience: AUDIENCE,
        algorithms: [ALG],
        requiredClaims: ['exp', 'org', 'ws'],
        clockTolerance: CLOCK_TOLERANCE_S,
      })
      const { org, ws, task, exp, use, jti } = payload as Record<string, unknown>
      if (typeof org !== 'string' || typeof ws !== 'string' || (task !== undefined && typeof task !== 'string') || typeof exp !== 'number') {
        return { ok: false, reason: 'invalid_token' }
      }
      // An unknown `use` is a token this version does not understand: refused, never widened.
      if (use !== undefined && (use !== 'startup' || task !== undefined || typeof jti !== 'string')) return { ok: false, reason: 'invalid_token' }
      const claims: CapabilityClaims = {
        org_id: org, workspace_id: ws, ...(task ? { task_id: task } : {}), exp,
        ...(use === 'startup' ? { startup: true as const, jti: jti as string } : {}),
      }
      if (this.#verified.size >= VERIFIED_CACHE_MAX) this.#verified.clear()
      this.#verified.set(token, claims)
      return { ok: true, claims }
    } catch (err) {
      // Bad signature, wrong alg, expired, malformed: all one outcome, by design. Only an expired
      // token has a verified signature, so only its claims may attribute the deny row.
      if (err instanceof joseErrors.JWTExpired) {
        const { org, ws } = err.payload as Record<string, unknown>
        if (typeof org === 'string' && typeof ws === 'string') return { ok: false, reason: 'invalid_token', expired: { org_id: org, workspace_id: ws } }
      }
      return { ok: false, reason: 'invalid_token' }
    }
  }
}

/** `Bearer <token>` (scheme case-insensitive); `Basic` with the token as password is accepted too,
 * because many HTTP clients can only put credentials into the proxy URL (`http://x:TOKEN@proxy`). */
function bearer(header: string | undefined): string | undefined {
  if (!header) return undefined
  const m = /^\s*(\S+)\s+(\S+)\s*$/.exec(header)
  if (!m) return header.trim() === '' ? undefined : '' // present but malformed → invalid_token
  const scheme = m[1]!.toLowerCase()
  if (scheme === 'bearer') return m[2]!
  if (scheme === 'basic') {
    const decoded = Buffer.from(m[2]!, 'base64').toString('utf8')
    const colon = decoded.indexOf(':')
    return colon >= 0 ? decoded.slice(colon + 1) : decoded
  }
  return ''
}
