import { newId, nowIso, POSTURES, type Posture } from '../../contract/index.js'
import { compact, type RepoContext } from './context.js'

export interface Org {
  id: string
  name: string
  posture: Posture
  created_at: string
}

export function createOrgsRepository({ db }: RepoContext) {
  return {
    /** Creates an org; undefined when the name is taken. */
    async create(input: { name: string }): Promise<Org | undefined> {
      const org: Org = { id: newId('org'), name: input.name, posture: 'active', created_at: nowIso() }
      const res = await db.insertInto('orgs').values(org).onConflict((oc) => oc.column('name').doNothing()).executeTakeFirst()
      return Number(res.numInsertedOrUpdatedRows ?? 0) === 1 ? org : undefined
    },
    async get(id: string): Promise<Org | undefined> {
      const row = await db.selectFrom('orgs').selectAll().where('id', '=', id).executeTakeFirst()
      return row && (compact(row) as Org)
    },
    async getByName(name: string): Promise<Org | undefined> {
      const row = await db.selectFrom('orgs').selectAll().where('name', '=', name).executeTakeFirst()
      return row && (compact(row) as Org)
    },
    /** Sets the billing posture; the updated org, or undefined when it does not exist. */
    async setPosture(id: string, posture: Posture): Promise<Org | undefined> {
      if (!POSTURES.includes(posture)) throw new TypeError(`unknown posture: ${posture}`)
      await db.updateTable('orgs').set({ posture }).where('id', '=', id).execute()
      return this.get(id)
    },
    async list(): Promise<Org[]> {
      const rows = await db.selectFrom('orgs').selectAll().orderBy('created_at').orderBy('id').execute()
      return rows.map((r) => compact(r) as Org)
    },
  }
}
export type OrgsRepository = ReturnType<typeof createOrgsRepository>
