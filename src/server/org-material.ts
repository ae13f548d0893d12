// What the secrets and credentials routes share: the org material service (src/secrets/) built
// from the server's dependencies, and its input errors in the envelope's words.
import { apiError } from '../contract/index.js'
import { isStaticAuthProvider } from '../policy/index.js'
import { MaterialInputError, OrgMaterialAdmin } from '../secrets/index.js'
import type { ServerDeps } from './types.js'

/** Org secrets and credentials for a route; 503 when this server was given no master key. */
export function materialAdmin(deps: ServerDeps): OrgMaterialAdmin {
  if (!deps.sealer) throw apiError('service_unavailable', 'secret storage is not configured on this server (no master key was given to it)')
  return new OrgMaterialAdmin(deps.store, deps.sealer, deps.audit, isStaticAuthProvider)
}

/** A MaterialInputError as the API answers it: 409 conflict, else 400 on the named field. */
export function asValidation(err: unknown): never {
  if (err instanceof MaterialInputError && err.kind === 'conflict') throw apiError('conflict', `${err.field}: ${err.message}`)
  if (err instanceof MaterialInputError) throw apiError('validation_error', `${err.field}: ${err.message}`, { fields: { [err.field]: err.message } })
  throw err
}
