// Server configuration from the environment (flags of `serve` override the basics). Every knob is
// documented in docs/api.md ("Configuration").
import { randomBytes } from 'node:crypto'
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { OidcConfig } from './identity/index.js'
import { resolveApiLimits } from './limits.js'
import type { ServerConfig } from './types.js'

export const WEBHOOK_SECRET_FILE = 'idp-webhook.secret'

function int(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const n = Number(raw)
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a non-negative number, got "${raw}"`)
  return n
}

/** The webhook secret: CORRAL_IDP_WEBHOOK_SECRET, else `<data-dir>/idp-webhook.secret` (created 0600). */
export async function webhookSecret(env: NodeJS.ProcessEnv, dataDir: string): Promise<string> {
  if (env.CORRAL_IDP_WEBHOOK_SECRET) return env.CORRAL_IDP_WEBHOOK_SECRET
  const path = join(dataDir, WEBHOOK_SECRET_FILE)
  try {
    return (await readFile(path, 'utf8')).trim()
  } catch {
    const secret = randomBytes(32).toString('base64url')
    await writeFile(path, `${secret}\n`, { mode: 0o600, flag: 'wx' }).catch(() => {})
    return (await readFile(path, 'utf8')).trim()
  }
}

export async function serverConfigFromEnv(env: NodeJS.ProcessEnv, dataDir: string): Promise<ServerConfig> {
  const capacity = int(env, 'CORRAL_RATE_LIMIT_BURST', 600)
  const refill = int(env, 'CORRAL_RATE_LIMIT_PER_SECOND', 20)
  return {
    rateLimit: capacity > 0 && refill > 0 ? { capacity, refillPerSecond: refill } : false,
    webhookSecret: await webhookSecret(env, dataDir),
    keyCacheTtlMs: int(env, 'CORRAL_KEY_CACHE_TTL_MS', 60_000),
    limits: resolveApiLimits(env),
    stream: {
      ...(env.CORRAL_STREAM_HEARTBEAT_MS ? { heartbeatMs: int(env, 'CORRAL_STREAM_HEARTBEAT_MS', 15_000) } : {}),
      ...(env.CORRAL_STREAM_MAX_DURATION_MS ? { maxDurationMs: int(env, 'CORRAL_STREAM_MAX_DURATION_MS', 3_600_000) } : {}),
    },
  }
}

/** An external OIDC provider when CORRAL_OIDC_ISSUER is set (with _JWKS_URL and _AUDIENCE). */
export function oidcConfigFromEnv(env: NodeJS.ProcessEnv): OidcConfig | undefined {
  if (!env.CORRAL_OIDC_ISSUER) return undefined
  if (!env.CORRAL_OIDC_JWKS_URL || !env.CORRAL_OIDC_AUDIENCE) throw new Error('CORRAL_OIDC_ISSUER needs CORRAL_OIDC_JWKS_URL and CORRAL_OIDC_AUDIENCE')
  return {
    issuer: env.CORRAL_OIDC_ISSUER,
    jwksUrl: env.CORRAL_OIDC_JWKS_URL,
    audience: env.CORRAL_OIDC_AUDIENCE,
    ...(env.CORRAL_OIDC_EMAIL_CLAIM ? { emailClaim: env.CORRAL_OIDC_EMAIL_CLAIM } : {}),
    ...(env.CORRAL_OIDC_ORG_CLAIM ? { orgClaim: env.CORRAL_OIDC_ORG_CLAIM } : {}),
  }
}
