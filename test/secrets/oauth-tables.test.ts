// The OAuth tables on both dialects: the provider configuration of a credential, authorization and
// rotation as a compare-and-swap on the generation, status flips only from the status seen, and
// consent states that are single use and expire; the refresh lease one holder claims at a time. Deleting the credential takes both with it.
import { describe, expect, it } from 'vitest'
import { testDialects } from '../helpers/dialects.js'

for (const d of testDialects()) {
  describe(`oauth tables [${d.name}]`, () => {
    async function seed() {
      const store = await d.open()
      const org = (await store.orgs.create({ name: `org-${Math.random().toString(36).slice(2)}` }))!
      const cred = await store.proxy.credentials.create(org.id, { name: 'gmail', provider: 'google', kind: 'oauth', ciphertext: 'v1.x' })
      await store.oauth.createClient(org.id, {
        credential_id: cred.id, issuer: 'https://idp.example', authorization_endpoint: 'https://idp.example/auth',
        token_endpoint: 'https://idp.example/token', metadata: { issuer: 'https://idp.example' }, client_id: 'corral', scopes: ['openid', 'offline_access'],
      })
      return { store, org, cred }
    }

    it('keeps the configuration; authorize and a rotating refresh move the generation, a refresh stored only from the generation read', async () => {
      const { store, org, cred } = await seed()
      const c = (await store.oauth.client(org.id, cred.id))!
      expect(c).toMatchObject({ issuer: 'https://idp.example', client_id: 'corral', scopes: ['openid', 'offline_access'], refresh_ciphertext: null, generation: 0, metadata: { issuer: 'https://idp.example' } })
      expect(await store.oauth.client('org_other', cred.id)).toBeUndefined()
      await store.oauth.authorize(org.id, cred.id, 'sealed-1', 'usr_1')
      expect(await store.oauth.client(org.id, cred.id)).toMatchObject({ refresh_ciphertext: 'sealed-1', generation: 1 })
      expect(await store.oauth.storeRefreshed(org.id, cred.id, 1, { accessCiphertext: 'access-2', refreshAt: 5, refreshCiphertext: 'sealed-2' })).toBe(true)
      expect(await store.oauth.storeRefreshed(org.id, cred.id, 1, { accessCiphertext: 'access-3', refreshAt: 6, refreshCiphertext: 'sealed-3' })).toBe(false)
      expect(await store.oauth.client(org.id, cred.id)).toMatchObject({ refresh_ciphertext: 'sealed-2', generation: 2, access_ciphertext: 'access-2', access_refresh_at: 5 })
      // Without a rotated refresh token only the access token moves; a re-consent drops it.
      expect(await store.oauth.storeRefreshed(org.id, cred.id, 2, { accessCiphertext: 'access-4', refreshAt: 7 })).toBe(true)
      expect(await store.oauth.client(org.id, cred.id)).toMatchObject({ refresh_ciphertext: 'sealed-2', generation: 2, access_ciphertext: 'access-4', access_refresh_at: 7 })
      await store.oauth.authorize(org.id, cred.id, 'sealed-5', 'usr_1')
      expect(await store.oauth.client(org.id, cred.id)).toMatchObject({ refresh_ciphertext: 'sealed-5', generation: 3, access_ciphertext: null, access_refresh_at: null })
    })

    it('the refresh lease is claimed by one holder at a time until it lapses or is let go', async () => {
      const { store, org, cred } = await seed()
      const claims = await Promise.all(['a', 'b', 'c', 'd'].map((who) => store.oauth.claimRefresh(org.id, cred.id, who, 1000, 2000)))
      expect(claims.filter(Boolean)).toHaveLength(1)
      const winner = ['a', 'b', 'c', 'd'][claims.indexOf(true)]!
      const other = winner === 'a' ? 'b' : 'a'
      expect(await store.oauth.claimRefresh(org.id, cred.id, other, 1999, 3000)).toBe(false)
      expect(await store.oauth.claimRefresh(org.id, cred.id, other, 2000, 3000)).toBe(true) // lapsed
      await store.oauth.releaseRefresh(org.id, cred.id, winner) // not the holder any more: no effect
      expect(await store.oauth.claimRefresh(org.id, cred.id, winner, 2500, 3500)).toBe(false)
      await store.oauth.releaseRefresh(org.id, cred.id, other)
      expect(await store.oauth.claimRefresh(org.id, cred.id, winner, 2500, 3500)).toBe(true)
      expect(await store.oauth.claimRefresh('org_other', cred.id, 'z', 9999, 10_000)).toBe(false)
    })

    it('flips a status only from the status the caller saw', async () => {
      const { store, org, cred } = await seed()
      expect(await store.oauth.flipStatus(org.id, cred.id, 'active', 'pending')).toBe(true)
      expect(await store.oauth.flipStatus(org.id, cred.id, 'active', 'revoked')).toBe(false)
      expect((await store.oauth.credential(org.id, cred.id))!.status).toBe('pending')
    })

    it('a consent state is claimed once, never after it expires, and goes with its credential', async () => {
      const { store, org, cred } = await seed()
      const base = { org_id: org.id, credential_id: cred.id, user_id: 'usr_1', creator_id: 'usr_1', nonce_hash: 'n', verifier_ciphertext: 'v' }
      const now = new Date()
      const later = new Date(now.getTime() + 60_000).toISOString()
      await store.oauth.createState({ ...base, state_hash: 'live', expires_at: later })
      await store.oauth.createState({ ...base, state_hash: 'old', expires_at: new Date(now.getTime() - 1).toISOString() })
      const claims = await Promise.all([1, 2, 3].map(() => store.oauth.claimState('live', now.toISOString())))
      expect(claims.filter(Boolean)).toHaveLength(1)
      expect((await store.oauth.state('live'))!.used_at).toBeTruthy()
      expect(await store.oauth.claimState('old', now.toISOString())).toBe(false)
      expect(await store.oauth.purgeStates(now.toISOString())).toBe(1)
      await store.proxy.credentials.delete(org.id, cred.id)
      expect(await store.oauth.state('live')).toBeUndefined()
      expect(await store.oauth.client(org.id, cred.id)).toBeUndefined()
    })
  })
}
