// Flags shared by `serve`, `proxy`, `dev` and the operator `admin` commands: where the data lives.
import { Flags } from '@oclif/core'

export const storeFlags = {
  'data-dir': Flags.string({ summary: 'Directory for the SQLite store, admin.key and other local state.', env: 'CORRAL_DATA_DIR', default: './.corral' }),
  db: Flags.string({ summary: 'Store URL: sqlite:<path> or postgres://… (default sqlite:<data-dir>/corral.db).', env: 'CORRAL_DB_URL' }),
}

/** Opens the store the flags point at (heavy modules imported only here, at run time). */
export async function openStoreFromFlags(flags: { 'data-dir': string; db?: string }) {
  const { openStore, defaultStoreUrl } = await import('../store/index.js')
  return openStore(flags.db ?? defaultStoreUrl(flags['data-dir']))
}

/** The store URL the flags point at (for a part that opens connections of its own to it). */
export async function storeUrlFromFlags(flags: { 'data-dir': string; db?: string }): Promise<string> {
  const { defaultStoreUrl } = await import('../store/index.js')
  return flags.db ?? defaultStoreUrl(flags['data-dir'])
}
