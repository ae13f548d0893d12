// A replica killed with SIGKILL while its appender runs and before its next checkpoint: the
// append is one transaction, so the restarted serve finds each row either in the tree or still in
// the queue, appends the rest, signs the next checkpoint consistent with the one before, and
// `corral audit verify` (the built binary: through the API, against the database, and from an
// export, each with the witness) exits 0. Both dialects.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { verifyConsistency } from '../../src/audit/merkle/index.js'
import { runCorral, startServe, type RunningServe } from '../helpers/serve.js'
import { chaosDialects } from './dialects.js'

const dbs = chaosDialects('audit-log-crash')
afterAll(async () => {
  for (const d of dbs) await d.drop()
})

async function api(serve: RunningServe, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${serve.url}/v1${path}`, {
    method, headers: { authorization: `Bearer ${serve.adminKey}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  })
  return { status: res.status, body: await res.json().catch(() => undefined) }
}

for (const d of dbs) {
  describe(`audit log across a kill -9 [${d.name}]`, () => {
    it('a crash between append and checkpoint loses nothing and the next checkpoint is consistent', async () => {
      const db = await d.create()
      const dataDir = mkdtempSync(join(tmpdir(), 'corral-logcrash-'))
      const witness = mkdtempSync(join(tmpdir(), 'corral-logwitness-'))
      // Append every 20 ms, never checkpoint by the clock: only on demand.
      const env = { CORRAL_AUDIT_WITNESS_DIR: witness, CORRAL_AUDIT_APPEND_INTERVAL_MS: '20', CORRAL_AUDIT_CHECKPOINT_INTERVAL_MS: '3600000' }
      let serve = await startServe({ dataDir, ...(db ? { db } : {}), env })
      const org = (await api(serve, 'GET', '/me')).body.org.id as string
      const mutate = (n: number, tag: string) => Promise.all(Array.from({ length: n }, (_, i) => api(serve, 'POST', '/api-keys', { label: `${tag}-${i}`, permission_set: 'read_only' })))
      await mutate(20, 'a')
      const first = await api(serve, 'POST', '/audit/checkpoints')
      expect(first.status).toBe(200)

      // Rows keep coming while the appender runs; SIGKILL lands mid-stream, after some appends and before any checkpoint.
      const load = mutate(60, 'b')
      await new Promise((r) => setTimeout(r, 150))
      serve.process.kill('SIGKILL')
      await load.catch(() => {})
      await serve.stop({ keepDataDir: true })

      serve = await startServe({ dataDir, ...(db ? { db } : {}), env })
      await mutate(5, 'c')
      const second = await api(serve, 'POST', '/audit/checkpoints')
      expect(second.status).toBe(200)
      expect(second.body.size).toBeGreaterThan(first.body.size)
      const proof = await api(serve, 'GET', `/audit/proofs/consistency?from=${first.body.size}&to=${second.body.size}`)
      const hex = (h: string) => Buffer.from(h, 'hex')
      expect(verifyConsistency(first.body.size, second.body.size, proof.body.proof.map(hex), hex(first.body.root_hash), hex(second.body.root_hash))).toBe(true)
      // Online through the API, as the org's own auditor (the caller's org, audit:read).
      const viaApi = await runCorral(['audit', 'verify', '--witness', witness], { env: { CORRAL_API_URL: serve.url, CORRAL_TOKEN: serve.adminKey } })
      expect(viaApi.stderr).toBe('')
      expect(viaApi.code).toBe(0)
      expect(viaApi.stdout).toMatch(new RegExp(`^ok: ${org}: `, 'm'))
      await serve.stop({ keepDataDir: true })

      const dbArgs = ['--data-dir', dataDir, ...(db ? ['--db', db] : [])]
      const verify = await runCorral(['audit', 'verify', '--org', org, '--witness', witness, ...dbArgs])
      expect(verify.stderr).toBe('')
      expect(verify.code).toBe(0)
      expect(verify.stdout).toMatch(new RegExp(`^ok: ${org}: \\d+ rows verified against 2 signed checkpoint`, 'm'))
      const json = JSON.parse((await runCorral(['audit', 'verify', '--org', org, '--witness', witness, '--json', ...dbArgs])).stdout)
      expect(json).toMatchObject({ ok: true, org_id: org, latest_checkpoint: second.body.size })

      // The export verifies offline, trusting only the witness's public keys and checkpoints.
      const out = mkdtempSync(join(tmpdir(), 'corral-logexport-'))
      expect((await runCorral(['audit', 'export', '--format', 'bundle', '--org', org, '--out', out, ...dbArgs])).code).toBe(0)
      const offline = await runCorral(['audit', 'verify', '--dir', out, '--witness', witness])
      expect(offline.code).toBe(0)
    }, 120_000)
  })
}
