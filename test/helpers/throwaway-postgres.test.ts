// The throwaway cluster helper (test/helpers/throwaway-postgres.ts) that the database-outage and
// chaos suites stand on: its own port and data, survives a fast and a crash-like restart with its
// data, and refuses connections while stopped — without touching the shared cluster.
import pg from 'pg'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describeThrowawayPostgres, startThrowawayPostgres, type ThrowawayPostgres } from './throwaway-postgres.js'

async function query(url: string, text: string): Promise<unknown[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 })
  await client.connect()
  try {
    return (await client.query(text)).rows
  } finally {
    await client.end()
  }
}

describeThrowawayPostgres('throwaway PostgreSQL cluster', () => {
  let cluster: ThrowawayPostgres
  beforeAll(async () => {
    cluster = await startThrowawayPostgres()
  })
  afterAll(() => cluster?.destroy())

  it('runs on its own port, keeps data through fast and immediate restarts, refuses while stopped', async () => {
    expect(cluster.port).not.toBe(5432)
    const url = await cluster.createDatabase('helper_check')
    await query(url, 'CREATE TABLE t (v int); INSERT INTO t VALUES (7)')
    const pid = cluster.pid()
    expect(pid).toBeGreaterThan(0)

    await cluster.stop()
    expect(cluster.running()).toBe(false)
    await expect(query(url, 'SELECT 1')).rejects.toThrow(/ECONNREFUSED|connect/)
    await cluster.start()
    expect(await query(url, 'SELECT v FROM t')).toEqual([{ v: 7 }])

    await cluster.restart({ mode: 'immediate' })
    expect(cluster.pid()).not.toBe(pid)
    expect(await query(url, 'SELECT v FROM t')).toEqual([{ v: 7 }])
  })
})
