// Encryption at rest for secrets and credential material: AES-256-GCM with a 96-bit random IV,
// the ciphertext bound to its row (org and name as additional data) so a value copied into
// another org's row does not decrypt. The master key comes from CORRAL_MASTER_KEY (32 bytes,
// base64 or hex) or, failing that, a 0600 `master.key` file created in the data dir.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'

const VERSION = 'v1'

export class Sealer {
  readonly #key: Buffer

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error('the master key must be 32 bytes')
    this.#key = key
  }

  seal(plaintext: string, bindTo: string): string {
    const iv = randomBytes(12)
    const c = createCipheriv('aes-256-gcm', this.#key, iv)
    c.setAAD(Buffer.from(bindTo))
    const data = Buffer.concat([c.update(plaintext, 'utf8'), c.final()])
    return `${VERSION}.${Buffer.concat([iv, c.getAuthTag(), data]).toString('base64')}`
  }

  /** Throws when the value was tampered with, bound to another row, or sealed with another key. */
  open(sealed: string, bindTo: string): string {
    const [version, b64] = sealed.split('.', 2)
    if (version !== VERSION || !b64) throw new Error('unknown sealed value format')
    const raw = Buffer.from(b64, 'base64')
    const d = createDecipheriv('aes-256-gcm', this.#key, raw.subarray(0, 12))
    d.setAAD(Buffer.from(bindTo))
    d.setAuthTag(raw.subarray(12, 28))
    return Buffer.concat([d.update(raw.subarray(28)), d.final()]).toString('utf8')
  }
}

export async function loadMasterKey(dataDir: string, env: NodeJS.ProcessEnv = process.env): Promise<Buffer> {
  const fromEnv = env.CORRAL_MASTER_KEY?.trim()
  if (fromEnv) {
    const key = /^[0-9a-f]{64}$/i.test(fromEnv) ? Buffer.from(fromEnv, 'hex') : Buffer.from(fromEnv, 'base64')
    if (key.length !== 32) throw new Error('CORRAL_MASTER_KEY must be 32 bytes (64 hex characters or base64)')
    return key
  }
  const file = join(dataDir, 'master.key')
  await mkdir(dataDir, { recursive: true })
  try {
    await writeFile(file, randomBytes(32).toString('base64') + '\n', { mode: 0o600, flag: 'wx' })
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
  }
  const key = Buffer.from((await readFile(file, 'utf8')).trim(), 'base64')
  if (key.length !== 32) throw new Error(`${file} does not hold a 32-byte key`)
  return key
}

export const secretBinding = (orgId: string, name: string): string => `secret:${orgId}:${name}`
/**
 * A credential's binding: its org and name, and for a member's personal credential its owner too
 * (`@<user id>`; names cannot hold `@`), so personal material copied into the org's row of the same
 * name, or into another member's, does not decrypt.
 */
export const credentialBinding = (orgId: string, name: string, owner?: string | null): string =>
  owner ? `credential:${orgId}:${name}@${owner}` : `credential:${orgId}:${name}`
