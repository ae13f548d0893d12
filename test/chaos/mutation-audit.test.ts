// A mutation and its audit row commit together: API clients create and delete secrets,
// credentials, providers, agent roles and API keys while `serve` is killed with SIGKILL, several
// times, on SQLite and on PostgreSQL. Afterwards every stored row of each kind has its audit row,
// and no audit row claims a change that is not there (a created resource is present or its delete
// is audited; a deleted one is absent). Counts are printed.
import { randomBytes } from 'node:crypto'
import { afterAll, describe, expect, it } from 'vitest'
import type { Kysely } from 'kysely'
import { auditRows, sleep, startChaos, until, type AuditRow, type Chaos } from './harness.js'
import { chaosDialects } from './dialects.js'

const ROUNDS = 4
const CONCURRENCY = 8
const MIN_ANSWERED_PER_ROUND = 40
const MAX_LOAD_MS = 15_000

const TYPES = [
  'secret_created', 'secret_deleted', 'credential_created', 'credential_deleted', 'provider_created',
  'agent_role_created', 'api_key_created', 'api_key_revoked',
]

interface Tally { answered: number; failed: number }

/** One client: cycles through every kind of mutation (creates, and deletes of what it created) until `stop`. */
async function client(url: () => string, key: string, run: string, n: number, tally: Tally, stop: AbortSignal): Promise<void> {
  const call = async (method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> | undefined }> => {
    const res = await fetch(`${url()}/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(10_000),
    })
    const json = (await res.json().catch(() => undefined)) as Record<string, unknown> | undefined
    if (res.status < 300) tally.answered++
    return { status: res.status, json }
  }
  for (let i = 0; !stop.aborted; i++) {
    const name = `mx_${run}_${n}_${i}`
    try {
      switch (i % 5) {
        case 0: {
          await call('POST', '/secrets', { name, value: `v-${i}` })
          if (i % 10 === 0) await call('DELETE', `/secrets/${name}`)
          break
        }
        case 1: {
          const c = await call('POST', '/credentials', { name, provider: 'github', kind: 'static_token', token: `t-${i}` })
          if (c.status < 300 && i % 2 === 1 && typeof c.json?.id === 'string') await call('DELETE', `/credentials/${c.json.id}`)
          break
        }
        case 2: {
          const p = await call('POST', '/providers', { name, kind: 'anthropic', domain: 'api.example.com' })
          if (p.status < 300 && typeof p.json?.id === 'string') await call('POST', '/agent-roles', { name, provider_id: p.json.id })
          break
        }
        default: {
          const k = await call('POST', '/api-keys', { label: name, permission_set: 'read_only' })
          if (k.status < 300 && i % 2 === 0 && typeof k.json?.id === 'string') await call('DELETE', `/api-keys/${k.json.id}`)
        }
      }
    } catch {
      tally.failed++
      await sleep(20)
    }
  }
}

interface Stored { secrets: Set<string>; credentials: Set<string>; providers: Set<string>; roles: Set<string>; keys: Set<string> }

async function stored(c: Chaos, run: string): Promise<Stored> {
  return c.store(async (store) => {
    const db = store.db as unknown as Kysely<Record<string, { id: string; name: string; label: string }>>
    const like = `mx_${run}_%`
    const col = async (table: string, key: 'id' | 'name', by: 'name' | 'label' = 'name') =>
      new Set((await db.selectFrom(table).select(key).where(by, 'like', like).execute()).map((r) => String(r[key])))
    return {
      secrets: await col('secrets', 'name'),
      credentials: await col('credentials', 'id'),
      providers: await col('providers', 'id'),
      roles: await col('agent_roles', 'id'),
      keys: await col('api_keys', 'id', 'label'),
    }
  })
}

/** Every disagreement between the stored rows and the audit log, as readable lines. */
function disagreements(s: Stored, rows: AuditRow[], run: string): string[] {
  const ours = rows.filter((r) => {
    const d = r.detail as { name?: string; label?: string } | null
    return (d?.name ?? d?.label ?? '').startsWith(`mx_${run}_`)
  })
  const ids = (type: string) => new Set(ours.filter((r) => r.event_type === type).map((r) => String((r.detail as { resource_id: string }).resource_id)))
  const out: string[] = []
  const kinds: Array<[string, Set<string>, string, string | undefined]> = [
    ['secret', s.secrets, 'secret_created', 'secret_deleted'],
    ['credential', s.credentials, 'credential_created', 'credential_deleted'],
    ['provider', s.providers, 'provider_created', undefined],
    ['agent role', s.roles, 'agent_role_created', undefined],
    ['api key', s.keys, 'api_key_created', 'api_key_revoked'],
  ]
  for (const [kind, present, created, deleted] of kinds) {
    const made = ids(created)
    const gone = deleted ? ids(deleted) : new Set<string>()
    for (const id of present) {
      if (!made.has(id)) out.push(`${kind} ${id} is stored without ${created}`)
      if (gone.has(id)) out.push(`${kind} ${id} is stored, but ${deleted} says it was deleted`)
    }
    for (const id of made) if (!present.has(id) && !gone.has(id)) out.push(`${created} ${id} claims a ${kind} that is not stored`)
    for (const id of gone) if (!made.has(id)) out.push(`${deleted} ${id} has no ${created}`)
  }
  return out
}

for (const d of chaosDialects('chaos/mutation-audit.test.ts')) {
  describe(`a mutation and its audit row under kill -9 [${d.name}]`, () => {
    let c: Chaos | undefined
    afterAll(async () => {
      await c?.close()
      await d.drop()
    })

    it('every stored secret, credential, provider, role and API key has its audit row, and no row claims an absent change', async () => {
      const db = await d.create()
      c = await startChaos(db ? { db } : {})
      const chaos = c
      const run = randomBytes(3).toString('hex')
      const tally: Tally = { answered: 0, failed: 0 }
      for (let round = 0; round < ROUNDS; round++) {
        const stop = new AbortController()
        const before = tally.answered
        const clients = Array.from({ length: CONCURRENCY }, (_, n) => client(() => chaos.serve.url, chaos.serve.adminKey, run, round * CONCURRENCY + n, tally, stop.signal))
        await until(() => tally.answered - before >= MIN_ANSWERED_PER_ROUND, MAX_LOAD_MS)
        await sleep(150) // mid-stream: mutations are in flight when the kill lands
        await chaos.kill9()
        stop.abort()
        await Promise.all(clients)
        await chaos.restart()
      }

      // A journal replay may finish just after the ready line: bounded wait for agreement.
      let problems: string[] = []
      let s: Stored | undefined
      for (let i = 0; i < 50; i++) {
        s = await stored(chaos, run)
        const rows = await chaos.store((store) => auditRows(store, TYPES))
        problems = disagreements(s, rows, run)
        if (problems.length === 0) break
        await sleep(200)
      }
      console.log(`[${d.name}] ${ROUNDS} kills; ${tally.answered} mutations answered 2xx, ${tally.failed} without an answer; stored: ${s!.secrets.size} secrets, ${s!.credentials.size} credentials, ${s!.providers.size} providers, ${s!.roles.size} roles, ${s!.keys.size} api keys; disagreements: ${problems.length}`)
      expect(problems).toEqual([])
      expect(s!.secrets.size + s!.credentials.size + s!.providers.size + s!.keys.size).toBeGreaterThan(ROUNDS * 10)
    }, 300_000)
  })
}
