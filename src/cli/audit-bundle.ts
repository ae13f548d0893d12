// The provable log's CLI pieces shared by `audit verify` and `audit export --format bundle`:
// where the log is read from (an export directory, else the store the flags name), what is
// trusted (a witness directory, verifier keys given as text or files), and how findings print.
import { readFile } from 'node:fs/promises'
import { Flags } from '@oclif/core'
import type { RemoteLog, VerifyReport } from '../audit/index.js'
import type { CorralClient } from '../client/index.js'
import { UsageError } from './errors.js'
import { openStoreFromFlags, storeUrlFromFlags } from './store-flags.js'

export const trustFlags = {
  witness: Flags.string({ helpValue: 'DIR', summary: 'The witness directory serve publishes to (CORRAL_AUDIT_WITNESS_DIR): its checkpoints and keys are trusted.', env: 'CORRAL_AUDIT_WITNESS_DIR' }),
  key: Flags.string({ helpValue: 'VKEY|FILE', multiple: true, summary: 'A trusted public key (`<name>+<hash>+<base64>`, or a file holding one); repeatable.' }),
}

/** The keys named by --key: the text itself, or the file it names. */
export async function keyTexts(keys: readonly string[] | undefined): Promise<string[]> {
  const out: string[] = []
  for (const k of keys ?? []) {
    if (/^[^\s+]+\+[0-9a-fA-F]{8}\+/.test(k)) out.push(k)
    else out.push((await readFile(k, 'utf8').catch(() => { throw new UsageError(`--key ${k}: neither a verifier key nor a readable file`) })).trim())
  }
  return out
}

/**
 * Where `audit verify` reads: `--dir` an export; `--org` the store (`--db` / `--data-dir`, an
 * operator's view of any org); else the API, the caller's own org.
 */
export async function verifyFrom(flags: { dir?: string; org?: string; witness?: string; key?: string[]; 'data-dir': string; db?: string }, api: () => Promise<RemoteLog>): Promise<VerifyReport> {
  const { bundleInput, databaseInput, remoteInput, verifyLog } = await import('../audit/index.js')
  const trust = { ...(flags.witness ? { witness: flags.witness } : {}), keys: await keyTexts(flags.key) }
  if (flags.dir) return verifyLog(await bundleInput(flags.dir, trust))
  if (!flags.org) return verifyLog(await remoteInput(await api(), trust))
  const store = await openStoreFromFlags(flags)
  try {
    // The rows are read and checked on threads of their own, each with a connection to the same database.
    return await verifyLog(await databaseInput(store, flags.org, trust, { thread: { url: await storeUrlFromFlags(flags) } }))
  } finally {
    await store.close()
  }
}

export async function exportBundle(flags: { org?: string; out?: string; witness?: string; 'data-dir': string; db?: string }): Promise<{ dir: string; org_id: string; tree_size: number; checkpoints: number }> {
  if (!flags.org || !flags.out) throw new UsageError('--format bundle needs --org and --out DIR')
  const { writeBundle } = await import('../audit/index.js')
  const store = await openStoreFromFlags(flags)
  try {
    const r = await writeBundle(store, flags.org, flags.out, flags.witness ? { witness: flags.witness } : {})
    return { dir: flags.out, org_id: flags.org, tree_size: r.treeSize, checkpoints: r.checkpoints }
  } finally {
    await store.close()
  }
}

/** One line per finding, errors first; the summary last. */
export function renderReport(r: VerifyReport): string {
  const lines = [...r.findings.filter((f) => f.error), ...r.findings.filter((f) => !f.error)].map((f) => `${f.error ? 'FAIL' : 'note'} ${f.kind}: ${f.message}`)
  lines.push(r.ok
    ? `ok: ${r.org_id}: ${r.tree_size} rows verified against ${r.checkpoints_verified} signed checkpoint(s) (latest ${r.latest_checkpoint ?? 'none'})`
    : `FAILED: ${r.org_id}: ${r.findings.filter((f) => f.error).length} finding(s) in a log of ${r.tree_size} rows`)
  return `${lines.join('\n')}\n`
}

type Row = Awaited<ReturnType<RemoteLog['unlogged']>>[number]['row']

/** The caller's org's log through the API (GET /v1/audit/log, …/unlogged, /audit/checkpoints). */
export async function remoteLog(client: CorralClient): Promise<RemoteLog> {
  const me = await client.request<{ org: { id: string } }>('GET', '/me')
  const listing = async () => {
    const notes: string[] = []
    let keys: string[] = []
    for (let after: number | undefined; ;) {
      const page = await client.request<{ checkpoints: Array<{ size: number; note: string }>; keys: Array<{ vkey: string }> }>('GET', `/audit/checkpoints?limit=1000${after === undefined ? '' : `&after_size=${after}`}`)
      keys = page.keys.map((k) => k.vkey)
      notes.push(...page.checkpoints.map((c) => c.note))
      if (page.checkpoints.length < 1000) return { notes, keys }
      after = page.checkpoints[page.checkpoints.length - 1].size
    }
  }
  let cached: Promise<{ notes: string[]; keys: string[] }> | undefined
  return {
    orgId: me.org.id,
    leaves: async (from, limit) => (await client.request<{ leaves: Array<{ index: number; id: string; leaf_hash: string; row: Row | null }> }>('GET', `/audit/log?from=${from}&limit=${limit}`)).leaves,
    unlogged: async () => (await client.request<{ rows: Array<{ row: Row; pending: boolean }> }>('GET', '/audit/log/unlogged')).rows,
    checkpoints: async () => (await (cached ??= listing())).notes,
    keys: async () => (await (cached ??= listing())).keys,
  }
}
