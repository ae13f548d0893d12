// The dialects a storage-backed suite runs on: SQLite always, Postgres when CORRAL_TEST_PG_URL is
// set. Each open() gives a fresh, isolated store — a temp SQLite file, or a new schema in the
// Postgres test database that is dropped when the store is closed (or when the file finishes).
// When a Postgres store is opened, the suite's file name is appended to
// test-results/pg-suites-ran, which .ci/run checks so the Postgres suite cannot silently vanish.
//
//   for (const d of testDialects()) describe(`store [${d.name}]`, () => { … await d.open() … })

import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join, resolve } from 'node:path'
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { afterAll, describe, expect } from 'vitest'
import { openStore, type Store } from '../../src/store/index.js'

export interface TestDialect {
  name: 'sqlite' | 'postgres'
  open: () => Promise<Store>
}

const RESULTS_DIR = resolve(import.meta.dirname, '../../test-results')

export function pgTestUrl(): string | undefined {
  return process.env.CORRAL_TEST_PG_URL || undefined
}

/**
 * A suite that needs PostgreSQL. It is always declared — vitest fails a file that declares no
 * suite ("No test suite found"), which is how a fresh clone's `npm test` broke — and is skipped,
 * with one line on stderr naming it, when CORRAL_TEST_PG_URL is unset. `fn` gets the URL.
 * .ci/run's collect-only step (no CORRAL_TEST_PG_URL) keeps every file honest about this.
 */
export function describePostgres(name: string, fn: (url: string) => void): void {
  const url = pgTestUrl()
  if (url) {
    describe(name, () => fn(url))
    return
  }
  console.warn(`${name}: CORRAL_TEST_PG_URL is not set; skipped (it needs PostgreSQL)`)
  describe.skip(name, () => {})
}

export function testDialects(): TestDialect[] {
  const open = new Set<Store>()
  const tempDirs: string[] = []
  afterAll(async () => {
    for (const s of [...siblings]) await s.close()
    siblings.clear()
    for (const s of [...open]) await s.close()
    for (const d of tempDirs) rmSync(d, { recursive: true, force: true })
  })

  const track = (store: Store, target: SiblingTarget, cleanup: () => Promise<void>): Store => {
    let closing: Promise<void> | undefined
    const wrapped: Store = {
      ...store,
      close: () =>
        (closing ??= (async () => {
          open.delete(wrapped)
          await store.close()
          await cleanup()
        })()),
    }
    open.add(wrapped)
    siblingTargets.set(wrapped, target)
    return wrapped
  }

  const dialects: TestDialect[] = [
    {
      name: 'sqlite',
      async open() {
        const dir = mkdtempSync(join(tmpdir(), 'corral-store-'))
        tempDirs.push(dir)
        const target = { url: `sqlite:${join(dir, 'corral.db')}` }
        return track(await openStore(target.url), target, async () => {})
      },
    },
  ]

  const url = pgTestUrl()
  if (!url) {
    noticeSkippedOnce()
    return dialects
  }
  dialects.push({
    name: 'postgres',
    async open() {
      markPostgresSuite()
      const schema = `t_${randomBytes(6).toString('hex')}`
      const store = await openStore(url, { schema, poolSize: 4 })
      return track(store, { url, schema }, () => dropSchema(url, schema))
    },
  })
  return dialects
}

/** Opens a second Store on the same database as `first` (another "process"): same file or schema. */
export async function openSibling(first: Store): Promise<Store> {
  const target = siblingTargets.get(first)
  if (!target) throw new Error('openSibling: store was not opened through testDialects()')
  const store = await openStore(target.url, { schema: target.schema, poolSize: 4 })
  siblings.add(store)
  return store
}
/** Where a store opened through testDialects() lives (for a child process opening the same database). */
export function storeTarget(store: Store): { url: string; schema?: string } | undefined {
  return siblingTargets.get(store)
}
interface SiblingTarget {
  url: string
  schema?: string
}
const siblingTargets = new WeakMap<Store, SiblingTarget>()
const siblings = new Set<Store>()

async function dropSchema(url: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  } finally {
    await client.end()
  }
}

function markPostgresSuite(): void {
  mkdirSync(RESULTS_DIR, { recursive: true })
  const testPath = expect.getState().testPath ?? process.argv[1] ?? 'unknown'
  appendFileSync(join(RESULTS_DIR, 'pg-suites-ran'), `${basename(testPath)}\n`)
}

/** One line per test run (not per file): the first worker to create the marker prints it. */
function noticeSkippedOnce(): void {
  try {
    mkdirSync(RESULTS_DIR, { recursive: true })
    writeFileSync(join(RESULTS_DIR, `.pg-skip-notice-${process.ppid}`), '', { flag: 'wx' })
    console.warn('store tests: CORRAL_TEST_PG_URL is not set; skipping the PostgreSQL runs (SQLite only)')
  } catch {
    // already announced by another worker of this run
  }
}
