// The `:own` rule for credentials (spec "Credentials", Authentication 5): a caller holding
// `auth:write` reaches every credential of the org; one holding only `auth:write:own` reaches only
// their own personal credentials — the org's and another member's rows are refused with
// permission_denied (they exist, so not found would lie to a member of the same org). A credential
// of another org is not found. The OAuth start route uses the same check.
import type { FastifyRequest } from 'fastify'
import { apiError, notFound } from '../contract/index.js'
import type { CredentialMeta } from '../store/index.js'
import type { OrgMaterialAdmin } from '../secrets/index.js'

/** Whether the route's requirement at `grantIndex` was met only by `auth:write:own`. */
export const ownOnly = (request: FastifyRequest, grantIndex = 0): boolean => request.grants[grantIndex]?.scope === 'own'

/** The credential if it exists in the caller's org and the caller's grant reaches it. */
export async function reachableCredential(admin: OrgMaterialAdmin, request: FastifyRequest, id: string, grantIndex = 0): Promise<CredentialMeta> {
  const p = request.principal!
  const meta = await admin.getCredential({ orgId: p.org.id, userId: p.userId }, id)
  if (!meta) throw notFound('credential')
  assertReaches(request, meta, grantIndex)
  return meta
}

/** Throws permission_denied when an `auth:write:own` caller targets a credential that is not their personal one. */
export function assertReaches(request: FastifyRequest, meta: CredentialMeta, grantIndex = 0): void {
  if (!ownOnly(request, grantIndex)) return
  const p = request.principal!
  if (p.kind !== 'session' || meta.owner_user_id !== p.userId) {
    throw apiError('permission_denied', meta.owner_user_id
      ? 'auth:write:own only covers your own personal credentials; this one belongs to another member'
      : 'auth:write:own only covers your own personal credentials; this is an org credential (auth:write manages those)')
  }
}
