// The databases a chaos scenario runs on: SQLite always; PostgreSQL when CORRAL_TEST_PG_URL is set,
// on a database created for the scenario (dropped afterwards). Without it, one line says so.
import { appendFileSync, mkdirSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { pgTestUrl } from '../helpers/dialects.js'

export interface ChaosDb { name: 'sqlite' | 'postgres'; /** undefined = the SQLite file in the data dir */ create(): Promise<string | undefined>; drop(): Promise<void> }

export function chaosDialects(suite: string): ChaosDb[] {
  const out: ChaosDb[] = [{ name: 'sqlite', create: async () => undefined, drop: async () => {} }]
  const base = pgTestUrl()
  if (!base) {
    console.log(`${suite}: CORRAL_TEST_PG_URL is not set; the PostgreSQL run does not happen (SQLite only)`)
    return out
  }
  const dbs: string[] = []
  out.push({
    name: 'postgres',
    async create() {
      const name = `corral_chaos_${randomBytes(4).toString('hex')}`
      const admin = new pg.Client({ connectionString: base })
      await admin.connect()
      await admin.query(`CREATE DATABASE ${name}`)
      await admin.end()
      dbs.push(name)
      const results = resolve(import.meta.dirname, '../../test-results')
      mkdirSync(results, { recursive: true })
      appendFileSync(join(results, 'pg-suites-ran'), `${suite}\n`)
      const u = new URL(base)
      u.pathname = `/${name}`
      return u.toString()
    },
    async drop() {
      const admin = new pg.Client({ connectionString: base })
      await admin.connect()
      for (const name of dbs.splice(0)) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await admin.end()
    },
  })
  return out
}
