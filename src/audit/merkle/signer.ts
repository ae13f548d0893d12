// The log's signing key: Ed25519, created at first start in the data dir as a 0600
// `audit-log-key.pem`, like the proxy's CA key, never in the database, so that whoever can rewrite
// the database cannot also sign for the rewrite. Rotation replaces the file (written aside, then
// renamed over); the signer notices the new file at its next checkpoint. Old public keys stay
// where they were published: the store's audit_log_keys and the witness's keys/.
import { createHash, generateKeyPairSync, type KeyObject } from 'node:crypto'
import { mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { privateKeyFromPem, rawPublicKey, verifierKey, type VerifierKey } from './note.js'

export const LOG_KEY_FILE = 'audit-log-key.pem'

export interface LogKey {
  key: KeyObject
  verifier: VerifierKey
}

export function logKeyPath(dataDir: string): string {
  return join(dataDir, LOG_KEY_FILE)
}

function keyOf(pem: string): LogKey {
  const key = privateKeyFromPem(pem)
  const pub = rawPublicKey(key)
  const name = `corral-audit-${createHash('sha256').update(pub).digest('hex').slice(0, 16)}`
  return { key, verifier: verifierKey(name, pub) }
}

function newPem(): string {
  return generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()
}

/** The key in `dataDir`, created on first start (exclusively: two processes starting together share one). */
export async function loadOrCreateLogKey(dataDir: string): Promise<LogKey> {
  const path = logKeyPath(dataDir)
  await mkdir(dataDir, { recursive: true })
  try {
    await writeFile(path, newPem(), { mode: 0o600, flag: 'wx' })
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
  }
  return keyOf(await readFile(path, 'utf8'))
}

/** Replaces the key with a new one; returns it. The old public key stays published. */
export async function rotateLogKey(dataDir: string): Promise<LogKey> {
  const path = logKeyPath(dataDir)
  const pem = newPem()
  const aside = `${path}.${process.pid}.new`
  await writeFile(aside, pem, { mode: 0o600 })
  await rename(aside, path)
  return keyOf(pem)
}

/** The current key, read again when the file changed (a rotation while serve runs). */
export class LogSigner {
  readonly #dataDir: string
  #current: LogKey
  #stamp: string

  private constructor(dataDir: string, key: LogKey, stamp: string) {
    this.#dataDir = dataDir
    this.#current = key
    this.#stamp = stamp
  }

  static async open(dataDir: string): Promise<LogSigner> {
    const key = await loadOrCreateLogKey(dataDir)
    return new LogSigner(dataDir, key, await stampOf(logKeyPath(dataDir)))
  }

  async current(): Promise<LogKey> {
    const path = logKeyPath(this.#dataDir)
    const stamp = await stampOf(path).catch(() => this.#stamp)
    if (stamp !== this.#stamp) {
      this.#current = keyOf(await readFile(path, 'utf8'))
      this.#stamp = stamp
    }
    return this.#current
  }
}

async function stampOf(path: string): Promise<string> {
  const s = await stat(path)
  return `${s.ino}:${s.mtimeMs}:${s.size}`
}
