// Reading policy inputs for the CLI: files or standard input ("-"). An unreadable input is a
// usage error (exit 2), distinct from a policy with errors (exit 1).

import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import path from 'node:path'
import { MAX_SOURCE_BYTES } from '../policy/index.js'
import { UsageError } from './errors.js'

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of process.stdin) {
    const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string)
    size += b.length
    // Keep one byte over the limit so the compiler reports document_too_large instead of us buffering forever.
    if (size > MAX_SOURCE_BYTES + 1) break
    chunks.push(b)
  }
  return Buffer.concat(chunks).toString('utf8')
}

export async function readInput(file: string): Promise<string> {
  if (file === '-') return readStdin()
  try {
    return await readFile(file, 'utf8')
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a directory' : code === 'EACCES' ? 'permission denied' : (e as Error).message
    throw new UsageError(`cannot read ${file}: ${why}`)
  }
}

export async function readPolicyInputs(files: string[]): Promise<Map<string, string>> {
  if (files.length === 0) {
    if (process.stdin.isTTY) throw new UsageError('no policy file given: pass FILE... or "-" to read standard input')
    files = ['-']
  }
  const out = new Map<string, string>()
  for (const f of files) out.set(f, await readInput(f))
  return out
}

/** Path relative to the repository root (GITHUB_WORKSPACE, else the nearest .git ancestor, else cwd). */
export function repoRelative(file: string): string {
  if (file === '-') return file
  let root = process.env.GITHUB_WORKSPACE
  if (!root) {
    let dir = process.cwd()
    for (;;) {
      if (existsSync(path.join(dir, '.git'))) {
        root = dir
        break
      }
      const up = path.dirname(dir)
      if (up === dir) break
      dir = up
    }
  }
  return path.relative(root ?? process.cwd(), path.resolve(file)).split(path.sep).join('/')
}
