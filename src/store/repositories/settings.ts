// Small process-wide settings (signing keys, bootstrap markers). setIfAbsent is first-writer-wins
// across replicas: every caller gets the value that was stored first.
import type { RepoContext } from './context.js'

export function createSettingsRepository({ db }: RepoContext) {
  return {
    async get(key: string): Promise<string | undefined> {
      const row = await db.selectFrom('settings').select('value').where('key', '=', key).executeTakeFirst()
      return row?.value
    },
    async set(key: string, value: string): Promise<void> {
      await db.insertInto('settings').values({ key, value }).onConflict((oc) => oc.column('key').doUpdateSet({ value })).execute()
    },
    /** Stores `value` unless the key exists; returns the stored value either way. */
    async setIfAbsent(key: string, value: string): Promise<string> {
      await db.insertInto('settings').values({ key, value }).onConflict((oc) => oc.column('key').doNothing()).execute()
      const row = await db.selectFrom('settings').select('value').where('key', '=', key).executeTakeFirstOrThrow()
      return row.value
    },
  }
}
export type SettingsRepository = ReturnType<typeof createSettingsRepository>
