// The provable log's CLI pieces shared by `audit verify` and `audit export --format bundle`:
// where the log is read from (an export directory, else the store the flags name), what is
// trusted (a witness directory, verifier keys given as text or files), and how findings print.
import { readFile } from 'node:fs/promises'
import { Flags } from '@oclif/core'
import type { VerifyReport } from '../audit/index.js'
import { UsageError } from './errors.js'
import { openStoreFromFlags } from './store-flags.js'

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

export async function verifyFrom(flags: { dir?: string; org?: string; witness?: string; key?: string[]; 'data-dir': string; db?: string }): Promise<VerifyReport> {
  const { bundleInput, databaseInput, verifyLog } = await import('../audit/index.js')
  const trust = { ...(flags.witness ? { witness: flags.witness } : {}), keys: await keyTexts(flags.key) }
  if (flags.dir) return verifyLog(await bundleInput(flags.dir, trust))
  if (!flags.org) throw new UsageError('--org is required to verify the log in the database (or --dir for an export)')
  const store = await openStoreFromFlags(flags)
  try {
    return await verifyLog(await databaseInput(store, flags.org, trust))
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
