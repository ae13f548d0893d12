// What the rest of corral asks the store instead of reading SQL, dialects or URL schemes itself:
// the default URL of a data dir, the files a SQLite URL names (hidden from sandboxes), the server a
// Postgres URL names (serve's own endpoints), whether the database is shared across hosts (the
// replica registry), and the oldest sealed secret and credential (the master-key check).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { defaultStoreUrl, openStore, storeFiles, storeServer, storeUrlDialect, type Store } from '../../src/store/index.js'
import { testDialects } from '../helpers/dialects.js'

describe('store URLs', () => {
  it('builds the default URL under the data dir, absolute', () => {
    expect(defaultStoreUrl('/srv/corral')).toBe('sqlite:/srv/corral/corral.db')
    expect(defaultStoreUrl('rel')).toBe(`sqlite:${join(process.cwd(), 'rel', 'corral.db')}`)
  })

  it('names the dialect of sqlite: and postgres URLs, and of nothing else', () => {
    expect(storeUrlDialect('sqlite:/x.db')).toBe('sqlite')
    expect(storeUrlDialect('sqlite::memory:')).toBe('sqlite')
    expect(storeUrlDialect('postgres://u@h/db')).toBe('postgres')
    expect(storeUrlDialect('postgresql://u@h/db')).toBe('postgres')
    expect(storeUrlDialect('mysql://u@h/db')).toBeUndefined()
    expect(storeUrlDialect('/plain/path.db')).toBeUndefined()
  })

  it('lists a SQLite store’s files and no files for Postgres or memory', () => {
    expect(storeFiles('sqlite:///srv/x.db')).toEqual(['/srv/x.db', '/srv/x.db-wal', '/srv/x.db-shm', '/srv/x.db-journal'])
    expect(storeFiles('postgresql://u@h/db')).toEqual([])
    expect(storeFiles('sqlite:')).toEqual([])
  })

  it('names the server of a Postgres URL, defaulting the port and unbracketing IPv6', () => {
    expect(storeServer('postgres://u:p@db.internal:6543/corral')).toEqual({ host: 'db.internal', port: 6543 })
    expect(storeServer('postgresql://u@[::1]/corral')).toEqual({ host: '::1', port: 5432 })
    expect(storeServer('sqlite:/x.db')).toBeUndefined()
    expect(storeServer('postgres://u@[::1/corral')).toBeUndefined()
    expect(storeServer(undefined)).toBeUndefined()
  })

  it('opens the default URL of a fresh data dir', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'corral-face-'))
    try {
      const store = await openStore(defaultStoreUrl(dir))
      expect(store.capabilities.sharedAcrossHosts).toBe(false)
      await store.close()
      expect(storeFiles(defaultStoreUrl(dir))[0]).toBe(join(dir, 'corral.db'))
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

for (const d of testDialects()) {
  describe(`the store's face [${d.name}]`, () => {
    let store: Store
    beforeAll(async () => {
      store = await d.open()
    })
    afterAll(async () => {
      await store.close()
    })

    it('says whether other hosts share the database', () => {
      expect(store.capabilities.sharedAcrossHosts).toBe(d.name === 'postgres')
    })

    it('hands the oldest sealed secret and credential of any org, or none', async () => {
      expect(await store.proxy.secrets.oldest()).toBeUndefined()
      expect(await store.proxy.credentials.oldest()).toBeUndefined()
      const a = (await store.orgs.create({ name: `a-${Date.now()}` }))!.id
      const b = (await store.orgs.create({ name: `b-${Date.now()}` }))!.id
      await store.proxy.credentials.create(b, { name: 'gh', provider: 'github', kind: 'static_token', ciphertext: 'v1.cred.b', owner_user_id: 'usr_x' })
      await new Promise((r) => setTimeout(r, 5))
      await store.proxy.credentials.create(a, { name: 'gl', provider: 'gitlab', kind: 'static_token', ciphertext: 'v1.cred.a' })
      await store.proxy.secrets.put(a, 'first', 'v1.secret.a')
      await new Promise((r) => setTimeout(r, 5))
      await store.proxy.secrets.put(b, 'second', 'v1.secret.b')
      expect(await store.proxy.secrets.oldest()).toEqual({ org_id: a, name: 'first', ciphertext: 'v1.secret.a' })
      expect(await store.proxy.credentials.oldest()).toEqual({ org_id: b, name: 'gh', owner_user_id: 'usr_x', ciphertext: 'v1.cred.b' })
    })
  })
}
