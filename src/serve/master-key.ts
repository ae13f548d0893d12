// Every replica (serve, `corral proxy`) must hold the same master key (CORRAL_MASTER_KEY, else
// <data-dir>/master.key): secrets and credentials are sealed with it in the shared database, and a
// replica with another key would fail every request that needs them, one by one, much later. At
// start the replica opens the oldest sealed org secret, else the oldest credential, with its key;
// when that fails the start is refused with one line. A database with no sealed material yet
// cannot tell (docs/reliability.md "Replicas").
import type { Sealer } from '../secrets/index.js'
import { credentialBinding, secretBinding } from '../secrets/index.js'
import type { Store } from '../store/index.js'

/** A start refused because this process's master key cannot open the database's sealed material (one line). */
export class MasterKeyMismatchError extends Error {
  override readonly name = 'MasterKeyMismatchError'
}

export const MASTER_KEY_MISMATCH = 'this process\'s master key (CORRAL_MASTER_KEY, else <data-dir>/master.key) cannot open the secrets and credentials sealed in this database: every replica (serve and corral proxy) needs the same CORRAL_MASTER_KEY'

export async function checkMasterKey(store: Store, sealer: Sealer): Promise<void> {
  const sample = await sealedSample(store)
  if (!sample) return
  try {
    sealer.open(sample.ciphertext, sample.binding)
  } catch {
    throw new MasterKeyMismatchError(MASTER_KEY_MISMATCH)
  }
}

async function sealedSample(store: Store): Promise<{ ciphertext: string; binding: string } | undefined> {
  const secret = await store.proxy.secrets.oldest()
  if (secret) return { ciphertext: secret.ciphertext, binding: secretBinding(secret.org_id, secret.name) }
  const cred = await store.proxy.credentials.oldest()
  return cred ? { ciphertext: cred.ciphertext, binding: credentialBinding(cred.org_id, cred.name, cred.owner_user_id) } : undefined
}
