// What the credential commands share: the record as the API returns it (metadata only, never
// material), how people see it, how a secret is read from standard input, and how a name finds
// its credential.
import type { CorralClient } from '../client/index.js'
import { CliError } from './errors.js'
import { details } from './role-output.js'
import { table } from './output.js'

export interface CredentialMeta {
  id: string; name: string; provider: string; kind: string; status: string; created_at: string; updated_at: string
  created_by_user_id?: string
  /** A member's personal credential: the member's user id; absent for the org's. */
  owner_user_id?: string
  /** OAuth credentials (docs/credentials.md). */
  scopes?: string[]
  issuer?: string
}

export const ownerOf = (c: CredentialMeta): string => c.owner_user_id ?? 'org'

export function credentialTable(rows: readonly CredentialMeta[]): string {
  return table(rows, [
    { header: 'name', get: (c) => c.name },
    { header: 'provider', get: (c) => c.provider },
    { header: 'kind', get: (c) => c.kind },
    { header: 'status', get: (c) => c.status },
    { header: 'owner', get: ownerOf },
    { header: 'id', get: (c) => c.id },
    { header: 'created_at', get: (c) => c.created_at },
  ])
}

const FIELDS = ['id', 'name', 'provider', 'kind', 'status', 'owner', 'scopes', 'issuer', 'created_by_user_id', 'created_at', 'updated_at'] as const

export function credentialDetails(c: CredentialMeta): string {
  return details({ ...c, owner: c.owner_user_id ? `${c.owner_user_id} (personal)` : 'org' }, FIELDS)
}

/** Standard input up to its end, one trailing newline removed (what `printf %s … |` or `echo … |` sends). */
export async function readStdinSecret(): Promise<string> {
  const chunks: Buffer[] = []
  for await (const c of process.stdin) chunks.push(c as Buffer)
  return Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '')
}

/** A `cred_…` id as is; else the one credential of that name the caller can see (several: an error naming their ids). */
export async function resolveCredential(client: CorralClient, ref: string): Promise<CredentialMeta> {
  if (ref.startsWith('cred_')) return client.request<CredentialMeta>('GET', `/credentials/${encodeURIComponent(ref)}`)
  const { credentials } = await client.request<{ credentials: CredentialMeta[] }>('GET', '/credentials')
  const found = credentials.filter((c) => c.name === ref)
  if (found.length === 1) return found[0]!
  if (found.length === 0) throw new CliError(`no credential named ${ref} that you can see (corral credential list)`, 'not_found')
  throw new CliError(`${found.length} credentials are named ${ref} (${found.map((c) => `${c.id}: ${ownerOf(c)}`).join(', ')}); give the id`, 'ambiguous')
}
