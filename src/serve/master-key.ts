// Every replica (serve, `corral proxy`) must hold the same master key (CORRAL_MASTER_KEY, else
// <data-dir>/master.key): secrets and credentials are sealed with it in the shared database, and a
// replica with another key would fail every request that needs them, one by one, much later. At
// start the replica opens the oldest sealed org secret, else the oldest credential, with its key;
// when that fails the start is refused with one line. A database with no sealed material yet
// cannot tell (docs/reliability.md "Replicas").
import type { Kysely } from 'kysely'
import type { Sealer } from '../secrets/index.js'
import { credentialBinding, secretBinding } from '../secrets/index.js'
import type { Store } from '../store/index.js'

/** A start refused because this process's master key cannot open the database's sealed material (one line). */
export class MasterKeyMismatchError extends Error {
  override readonly name = 'MasterKeyMismatchError'
}

export const MASTER_KEY_MISMATCH = 'this process\'s master key (CORRAL_MASTER_KEY, else <data-dir>/master.key) cannot open the secrets and credentials sealed in this database: every replica (serve and corral proxy) needs the same CORRAL_MASTER_KEY'

export async function checkMasterKey(store: Store, sealer: Sealer): Promise<void> {
  // The secrets and credentials tables are the proxy's (src/store/proxy-tables.ts); two plain reads.
  const db = store.db as unknown as Kysely<any>
  const secret = await db.selectFrom('secrets').select(['org_id', 'name', 'ciphertext']).orderBy('created_at').limit(1).executeTakeFirst()
  const sample = secret
    ? { ciphertext: String(secret.ciphertext), binding: secretBinding(String(secret.org_id), String(secret.name)) }
    : await credentialSample(store)
  if (!sample) return
  try {
    sealer.open(sample.ciphertext, sample.binding)
  } catch {
    throw new MasterKeyMismatchError(MASTER_KEY_MISMATCH)
  }
}

async function credentialSample(store: Store): Promise<{ ciphertext: string; binding: string } | undefined> {
  const row = await (store.db as unknown as Kysely<any>).selectFrom('credentials').select(['org_id', 'name', 'ciphertext', 'owner_user_id']).orderBy('created_at').limit(1).executeTakeFirst()
  return row ? { ciphertext: String(row.ciphertext), binding: credentialBinding(String(row.org_id), String(row.name), row.owner_user_id as string | null) } : undefined
}
