// API-key secrets: 32 random bytes behind a recognisable `crl_` prefix (so secret scanners and
// people can tell a corral key at a glance). Only the SHA-256 hash is stored; `prefix` is the
// short displayable form (first and last few characters), never enough to guess the rest.
import { createHash, randomBytes } from 'node:crypto'

export const API_KEY_PREFIX = 'crl_'

export function generateApiKeySecret(): string {
  return API_KEY_PREFIX + randomBytes(32).toString('base64url')
}

/** The stored form. SHA-256 is enough: the secret has 256 bits of entropy, so no stretching. */
export function hashApiKeySecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex')
}

/** e.g. `crl_Xq3v…9fZk`: safe to display in lists and audit detail. */
export function displayPrefix(secret: string): string {
  const body = secret.slice(API_KEY_PREFIX.length)
  return `${API_KEY_PREFIX}${body.slice(0, 4)}…${body.slice(-4)}`
}

export function looksLikeApiKey(token: string): boolean {
  return token.startsWith(API_KEY_PREFIX)
}
