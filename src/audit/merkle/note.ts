// Checkpoints as signed notes (C2SP tlog-checkpoint over C2SP signed-note): the body is
//   <origin>\n<tree size>\n<base64 root hash>\ntime <RFC 3339>\n
// then a blank line and one signature line `— <key name> <base64(key hash[4] || Ed25519 sig)>`.
// The key hash is SHA-256(name || "\n" || 0x01 || public key)[:4]; a verifier key is written
// `<name>+<hex key hash>+<base64(0x01 || public key)>` (the signed-note "vkey"), so any
// signed-note tool can check a corral checkpoint with the published key.
import { createHash, createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto'

const ED25519 = 0x01
const SIG_PREFIX = '\u2014 '
const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex')

export interface Checkpoint {
  origin: string
  size: number
  /** 32 bytes. */
  root: Buffer
  /** RFC 3339 UTC. */
  time: string
}

export interface SignedCheckpoint extends Checkpoint {
  keyName: string
  /** The whole note as published. */
  note: string
}

export interface VerifierKey {
  name: string
  /** 32-byte Ed25519 public key. */
  publicKey: Buffer
  vkey: string
}

export function keyHash(name: string, publicKey: Buffer): Buffer {
  return createHash('sha256').update(name).update('\n').update(Buffer.from([ED25519])).update(publicKey).digest().subarray(0, 4)
}

export function rawPublicKey(key: KeyObject): Buffer {
  const spki = (key.type === 'private' ? createPublicKey(key) : key).export({ format: 'der', type: 'spki' })
  return spki.subarray(spki.length - 32)
}

export function verifierKey(name: string, publicKey: Buffer): VerifierKey {
  const vkey = `${name}+${keyHash(name, publicKey).toString('hex')}+${Buffer.concat([Buffer.from([ED25519]), publicKey]).toString('base64')}`
  return { name, publicKey, vkey }
}

/** Parses `<name>+<hex hash>+<base64 key>`; undefined when it is not an Ed25519 vkey whose hash matches. */
export function parseVerifierKey(text: string): VerifierKey | undefined {
  // The key's base64 may itself hold '+': split at the first two only.
  const t = text.trim()
  const a = t.indexOf('+')
  const b = t.indexOf('+', a + 1)
  const parts = [t.slice(0, a), t.slice(a + 1, b), t.slice(b + 1)]
  if (a <= 0 || b < 0 || /\s/.test(parts[0])) return undefined
  const raw = Buffer.from(parts[2], 'base64')
  if (raw.length !== 33 || raw[0] !== ED25519) return undefined
  const publicKey = raw.subarray(1)
  if (keyHash(parts[0], publicKey).toString('hex') !== parts[1].toLowerCase()) return undefined
  return verifierKey(parts[0], publicKey)
}

export function checkpointBody(c: Checkpoint): string {
  return `${c.origin}\n${c.size}\n${c.root.toString('base64')}\ntime ${c.time}\n`
}

export function signCheckpoint(c: Checkpoint, keyName: string, privateKey: KeyObject): SignedCheckpoint {
  const body = checkpointBody(c)
  const sig = sign(null, Buffer.from(body), privateKey)
  const pub = rawPublicKey(privateKey)
  const line = `${SIG_PREFIX}${keyName} ${Buffer.concat([keyHash(keyName, pub), sig]).toString('base64')}\n`
  return { ...c, keyName, note: `${body}\n${line}` }
}

export type NoteResult =
  | { ok: true; checkpoint: SignedCheckpoint }
  | { ok: false; problem: string; checkpoint?: Checkpoint; keyName?: string }

/** Parses a checkpoint note and checks its signature against `keys` (by name and key hash). */
export function openCheckpoint(note: string, keys: readonly VerifierKey[]): NoteResult {
  const sep = note.indexOf('\n\n')
  if (sep < 0) return { ok: false, problem: 'not a signed note (no blank line before the signatures)' }
  const body = note.slice(0, sep + 1)
  const lines = body.split('\n')
  const size = Number(lines[1])
  const root = Buffer.from(lines[2] ?? '', 'base64')
  const time = lines[3]?.startsWith('time ') ? lines[3].slice(5) : ''
  if (!lines[0] || !/^\d+$/.test(lines[1] ?? '') || !Number.isSafeInteger(size) || root.length !== 32 || !time) {
    return { ok: false, problem: 'not a corral checkpoint (origin, size, root hash, time)' }
  }
  const checkpoint: Checkpoint = { origin: lines[0], size, root, time }
  const sigLines = note.slice(sep + 2).split('\n').filter((l) => l.startsWith(SIG_PREFIX))
  let keyName: string | undefined
  for (const l of sigLines) {
    const [name, b64] = l.slice(SIG_PREFIX.length).split(' ')
    keyName ??= name
    const raw = Buffer.from(b64 ?? '', 'base64')
    if (raw.length !== 68) continue
    for (const k of keys) {
      if (k.name !== name || !keyHash(k.name, k.publicKey).equals(raw.subarray(0, 4))) continue
      if (verify(null, Buffer.from(body), publicKeyObject(k.publicKey), raw.subarray(4))) {
        return { ok: true, checkpoint: { ...checkpoint, keyName: name, note } }
      }
      return { ok: false, problem: `the signature of key ${name} does not verify`, checkpoint, keyName: name }
    }
  }
  return { ok: false, problem: keyName ? `signed by ${keyName}, which is not a trusted key` : 'not signed', checkpoint, keyName }
}

export function publicKeyObject(raw: Buffer): KeyObject {
  return createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, raw]), format: 'der', type: 'spki' })
}

export function privateKeyFromPem(pem: string): KeyObject {
  const key = createPrivateKey(pem)
  if (key.asymmetricKeyType !== 'ed25519') throw new Error('the audit log key is not an Ed25519 key')
  return key
}
