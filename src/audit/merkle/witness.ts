// The witness: a directory outside the database (CORRAL_AUDIT_WITNESS_DIR) that receives every
// signed checkpoint and every public key, as files never rewritten:
//   <dir>/keys/<key name>.vkey
//   <dir>/<org id>/<tree size, 20 digits>.checkpoint
// Whoever rewrites the database cannot reach these files; an operator points the directory at a
// different machine's mount, an append-only bucket sync or a WORM volume (docs/audit.md "The
// witness"). A file already there is never replaced: a second, different checkpoint for one size
// is refused and reported, which is a fork.
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'

export function checkpointFileName(size: number): string {
  return `${String(size).padStart(20, '0')}.checkpoint`
}

const SAFE = /^[A-Za-z0-9_.-]+$/

export class WitnessDir {
  constructor(readonly dir: string) {}

  /** Writes the checkpoint unless that size is there; 'forked' when a different note holds it. */
  async publishCheckpoint(orgId: string, size: number, note: string): Promise<'written' | 'present' | 'forked'> {
    if (!SAFE.test(orgId)) throw new Error(`org id ${JSON.stringify(orgId)} cannot name a witness directory`)
    const dir = join(this.dir, orgId)
    await mkdir(dir, { recursive: true })
    return writeOnce(join(dir, checkpointFileName(size)), note)
  }

  async publishKey(name: string, vkey: string): Promise<'written' | 'present' | 'forked'> {
    if (!SAFE.test(name)) throw new Error(`key name ${JSON.stringify(name)} cannot name a file`)
    await mkdir(join(this.dir, 'keys'), { recursive: true })
    return writeOnce(join(this.dir, 'keys', `${name}.vkey`), `${vkey}\n`)
  }

  async checkpoints(orgId: string): Promise<string[]> {
    return readFiles(join(this.dir, orgId), '.checkpoint')
  }

  async keys(): Promise<string[]> {
    return readFiles(join(this.dir, 'keys'), '.vkey')
  }
}

async function writeOnce(path: string, text: string): Promise<'written' | 'present' | 'forked'> {
  try {
    await writeFile(path, text, { flag: 'wx', mode: 0o644 })
    return 'written'
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    return (await readFile(path, 'utf8')) === text ? 'present' : 'forked'
  }
}

/** The files of `dir` ending in `ext`, in name order; none when the directory does not exist. */
export async function readFiles(dir: string, ext: string): Promise<string[]> {
  let names: string[]
  try {
    names = (await readdir(dir)).filter((n) => n.endsWith(ext)).sort()
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw err
  }
  return Promise.all(names.map((n) => readFile(join(dir, n), 'utf8')))
}
