// The start-up check that this replica's master key opens the database's sealed material, asked
// through the store's repositories (no SQL in serve): on both dialects, a store with nothing
// sealed passes, the right key passes, and another key is refused whether the sample is a secret
// or (with no secret in any org) a member's personal credential bound to its owner.
import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { credentialBinding, secretBinding, Sealer } from '../../src/secrets/index.js'
import { MASTER_KEY_MISMATCH, MasterKeyMismatchError, checkMasterKey } from '../../src/serve/master-key.js'
import type { Store } from '../../src/store/index.js'
import { testDialects } from '../helpers/dialects.js'

for (const d of testDialects()) {
  describe(`master-key check [${d.name}]`, () => {
    const ours = new Sealer(randomBytes(32))
    const theirs = new Sealer(randomBytes(32))
    let store: Store
    let org: string
    beforeAll(async () => {
      store = await d.open()
      org = (await store.orgs.create({ name: `mk-${Date.now()}` }))!.id
    })
    afterAll(async () => {
      await store.close()
    })

    it('passes on a database with nothing sealed, whatever the key', async () => {
      await expect(checkMasterKey(store, theirs)).resolves.toBeUndefined()
    })

    it('opens a personal credential when no org has a secret, and refuses another key', async () => {
      await store.proxy.credentials.create(org, {
        name: 'gh', provider: 'github', kind: 'static_token', owner_user_id: 'usr_o',
        ciphertext: ours.seal('{"token":"t"}', credentialBinding(org, 'gh', 'usr_o')),
      })
      await expect(checkMasterKey(store, ours)).resolves.toBeUndefined()
      const refused = await checkMasterKey(store, theirs).catch((e: unknown) => e)
      expect(refused).toBeInstanceOf(MasterKeyMismatchError)
      expect((refused as Error).message).toBe(MASTER_KEY_MISMATCH)
    })

    it('prefers the oldest secret, and refuses another key', async () => {
      // A secret sealed under another key: were the credential still the sample, `ours` would pass.
      await store.proxy.secrets.put(org, 'api', theirs.seal('s3cret', secretBinding(org, 'api')))
      await expect(checkMasterKey(store, theirs)).resolves.toBeUndefined()
      await expect(checkMasterKey(store, ours)).rejects.toBeInstanceOf(MasterKeyMismatchError)
    })
  })
}
