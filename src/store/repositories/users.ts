import { newId, nowIso } from '../../contract/index.js'
import { compact, type RepoContext } from './context.js'

export interface User {
  id: string
  email: string
  created_at: string
}

/** Emails are compared case-insensitively: stored trimmed and lower-cased. */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase()
}

export function createUsersRepository({ db }: RepoContext) {
  return {
    /** Creates a user, or returns the existing one with that email (idempotent on email). */
    async create(input: { email: string }): Promise<User> {
      const email = normalizeEmail(input.email)
      const user: User = { id: newId('usr'), email, created_at: nowIso() }
      await db.insertInto('users').values(user).onConflict((oc) => oc.column('email').doNothing()).execute()
      const row = await db.selectFrom('users').selectAll().where('email', '=', email).executeTakeFirstOrThrow()
      return compact(row)
    },
    async get(id: string): Promise<User | undefined> {
      const row = await db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst()
      return row && compact(row)
    },
    async getByEmail(email: string): Promise<User | undefined> {
      const row = await db.selectFrom('users').selectAll().where('email', '=', normalizeEmail(email)).executeTakeFirst()
      return row && compact(row)
    },
  }
}
export type UsersRepository = ReturnType<typeof createUsersRepository>
