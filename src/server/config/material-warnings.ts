// A role whose caps.yaml names a credential or secret the org does not hold is saved (the spec
// does not refuse it: the material may be created afterwards), but the save answers one warning
// per missing name, so nobody ships a policy that silently sends requests without its credential
// (docs/roles.md "Warnings for missing credentials and secrets"). A credential name counts as
// present when the org holds one of that name, org-wide or any member's personal one (the
// workspace creator's personal credential is chosen first, docs/credentials.md).
import { compilePolicyCached } from '../../policy/index.js'
import type { Store } from '../../store/index.js'
import type { RoleWarningCode } from '../../contract/index.js'

export interface MaterialWarning {
  code: RoleWarningCode
  name: string
  /** The capabilities whose transforms name it. */
  capabilities: string[]
  message: string
}

/** What a policy's transforms name: credential and secret names, each with the capabilities using it. */
export function namedMaterial(source: string | null | undefined): { credentials: Map<string, string[]>; secrets: Map<string, string[]> } {
  const credentials = new Map<string, string[]>()
  const secrets = new Map<string, string[]>()
  const result = source ? compilePolicyCached(source) : undefined
  if (!result?.ok) return { credentials, secrets }
  for (const cap of result.policy.capabilities) {
    for (const n of cap.credentials) credentials.set(n, [...(credentials.get(n) ?? []), cap.name])
    for (const n of cap.secrets) secrets.set(n, [...(secrets.get(n) ?? []), cap.name])
  }
  return { credentials, secrets }
}

/** One warning per credential or secret name the policy uses that the org does not hold, sorted by kind then name. */
export async function missingMaterial(store: Pick<Store, 'proxy'>, orgId: string, source: string | null | undefined): Promise<MaterialWarning[]> {
  const { credentials, secrets } = namedMaterial(source)
  if (credentials.size === 0 && secrets.size === 0) return []
  const [creds, secs] = await Promise.all([store.proxy.credentials.list(orgId), store.proxy.secrets.list(orgId)])
  const haveCred = new Set(creds.map((c) => c.name))
  const haveSecret = new Set(secs.map((s) => s.name))
  const warnings: MaterialWarning[] = []
  for (const [name, caps] of [...credentials].sort(([a], [b]) => a.localeCompare(b))) {
    if (haveCred.has(name)) continue
    warnings.push({ code: 'missing_credential', name, capabilities: caps, message: `credential ${name} does not exist in this organisation; auth transforms naming it will record auth_unavailable until it is created` })
  }
  for (const [name, caps] of [...secrets].sort(([a], [b]) => a.localeCompare(b))) {
    if (haveSecret.has(name)) continue
    warnings.push({ code: 'missing_secret', name, capabilities: caps, message: `secret ${name} does not exist in this organisation; transforms reading it will record apply_error until it is set` })
  }
  return warnings
}
