// Store URLs: `sqlite:<path>` (`sqlite::memory:` for a throwaway store) or `postgres://…` /
// `postgresql://…`. The rest of corral passes a URL through and asks these what it names (the
// files a sandbox must not see, the server serve connects to); only src/store/ reads its scheme.
import { join, resolve } from 'node:path'
import type { DialectName } from './dialects/types.js'

/** The store serve, proxy and the admin commands open when no --db / CORRAL_DB_URL is given. */
export const defaultStoreUrl = (dataDir: string): string => `sqlite:${join(resolve(dataDir), 'corral.db')}`

/** The dialect a URL names, or undefined when it is neither sqlite: nor postgres. */
export function storeUrlDialect(url: string): DialectName | undefined {
  if (url.startsWith('sqlite:')) return 'sqlite'
  if (/^postgres(ql)?:\/\//.test(url)) return 'postgres'
  return undefined
}

/** The path of a `sqlite:` URL as written (`sqlite:///abs` is `/abs`); '' when it names none. */
export function sqlitePath(url: string): string {
  return url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '')
}

/** A SQLite store's file and its journal siblings, absolute; none for Postgres or an in-memory store. */
export function storeFiles(url: string | undefined): string[] {
  if (!url || storeUrlDialect(url) !== 'sqlite') return []
  const path = sqlitePath(url)
  if (!path || path === ':memory:') return []
  const file = resolve(path)
  return [file, `${file}-wal`, `${file}-shm`, `${file}-journal`]
}

/** The database server a `postgres://` URL connects to (SQLite has none; an unparsable URL names none). */
export function storeServer(url: string | undefined): { host: string; port: number } | undefined {
  if (!url || storeUrlDialect(url) !== 'postgres') return undefined
  try {
    const u = new URL(url)
    return { host: u.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1', port: Number(u.port || 5432) }
  } catch {
    return undefined
  }
}
