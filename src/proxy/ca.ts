// The corral certificate authority and the per-host leaf certificates the TLS front presents
// inside CONNECT tunnels. The CA is created once, at first start, in the data dir (`ca.pem` and a
// 0600 `ca-key.pem`); workspaces trust `ca.pem` (`corral ca export`). Its private key is never
// logged, never returned by any API and never leaves this module except to sign leaves.
//
// Keys are ECDSA P-256: generation and signing cost well under a millisecond, and every TLS stack
// agents use accepts them. One leaf key pair is shared by all leaves (as mitmproxy does): what a
// client verifies is the CA signature over (host, key), so per-host keys would add key generation
// to every first connection without adding security against anyone who could read this process.
import { webcrypto, X509Certificate as NodeX509 } from 'node:crypto'

type CryptoKey = webcrypto.CryptoKey
type CryptoKeyPair = webcrypto.CryptoKeyPair
import { createSecureContext, type SecureContext } from 'node:tls'
import { mkdir, readFile, writeFile, chmod } from 'node:fs/promises'
import { isIP } from 'node:net'
import { join } from 'node:path'
import type * as X509 from '@peculiar/x509'

/**
 * The certificate builder, loaded when a certificate is first signed (the CA at first start, a
 * leaf at a host's first connection): it is large, and an idle process never signs.
 */
let x509Module: Promise<typeof X509> | undefined
const loadX509 = (): Promise<typeof X509> => (x509Module ??= import('@peculiar/x509').then((x509) => {
  x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0])
  return x509
}))

const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const
const CA_FILE = 'ca.pem'
const CA_KEY_FILE = 'ca-key.pem'
/** Leaves are valid from an hour ago (clock skew inside sandboxes) for 30 days; the cache is per process. */
const LEAF_BACKDATE_MS = 60 * 60 * 1000
const LEAF_LIFETIME_MS = 30 * 24 * 60 * 60 * 1000
/** Bound on cached leaf contexts; an agent talks to a handful of hosts, a scanner would not stop. */
const LEAF_CACHE_MAX = 10_000

export interface CorralCa {
  /** PEM of the CA certificate, the only part that is ever shown to anyone. */
  readonly certPem: string
  readonly privateKey: CryptoKey
}

export function caCertPath(dataDir: string): string {
  return join(dataDir, CA_FILE)
}

/** Loads the CA from `dataDir`, creating it (and the directory) on first start. */
export async function loadOrCreateCa(dataDir: string): Promise<CorralCa> {
  const certPath = join(dataDir, CA_FILE)
  const keyPath = join(dataDir, CA_KEY_FILE)
  const existing = await readPair(certPath, keyPath)
  if (existing) return existing
  await mkdir(dataDir, { recursive: true })
  const keys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as CryptoKeyPair
  const now = Date.now()
  const x509 = await loadX509()
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: 'CN=corral proxy CA, O=corral',
    notBefore: new Date(now - LEAF_BACKDATE_MS),
    notAfter: new Date(now + 10 * 365 * 24 * 60 * 60 * 1000),
    keys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  })
  const keyPem = pkcs8Pem(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey))
  // Key first, exclusively and 0600: when two processes start on one data dir together, the one
  // that loses the race waits for the winner's certificate instead of pairing its own with the
  // winner's key.
  try {
    await writeFile(keyPath, keyPem, { mode: 0o600, flag: 'wx' })
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    for (let i = 0; i < 100; i++) {
      const winner = await readPair(certPath, keyPath)
      if (winner) return winner
      await new Promise((r) => setTimeout(r, 50))
    }
    throw new Error(`${keyPath} exists without ${certPath}; remove it to let corral create a new CA`)
  }
  await writeFile(certPath, cert.toString('pem') + '\n', { mode: 0o644 })
  await chmod(keyPath, 0o600)
  const loaded = await readPair(certPath, keyPath)
  if (!loaded) throw new Error(`could not create the corral CA in ${dataDir}`)
  return loaded
}

async function readPair(certPath: string, keyPath: string): Promise<CorralCa | undefined> {
  let certPem: string
  let keyPem: string
  try {
    ;[certPem, keyPem] = await Promise.all([readFile(certPath, 'utf8'), readFile(keyPath, 'utf8')])
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw err
  }
  // Parsed (and so checked) by node:crypto, which prints it back in the same PEM form as the builder.
  const cert = new NodeX509(certPem)
  const der = Buffer.from(keyPem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64')
  const privateKey = await webcrypto.subtle.importKey('pkcs8', der, ALG, false, ['sign'])
  return { certPem: cert.toString(), privateKey }
}

/**
 * Mints and caches one TLS SecureContext per SNI host. Concurrent first connections to the same
 * host share one mint (the promise is cached), so a host is signed exactly once per process.
 */
export class LeafMinter {
  readonly #ca: CorralCa
  readonly #cache = new Map<string, Promise<SecureContext>>()
  #issuer: Promise<{ x509: typeof X509; cert: X509.X509Certificate }> | undefined
  #leafKeys: Promise<{ keys: CryptoKeyPair; keyPem: string }> | undefined
  /** Number of leaves actually signed (for tests and the benchmark). */
  minted = 0

  constructor(ca: CorralCa) {
    this.#ca = ca
  }

  contextFor(host: string): Promise<SecureContext> {
    const key = normalizeHost(host)
    let ctx = this.#cache.get(key)
    if (!ctx) {
      if (this.#cache.size >= LEAF_CACHE_MAX) this.#cache.delete(this.#cache.keys().next().value!)
      ctx = this.#mint(key)
      this.#cache.set(key, ctx)
      ctx.catch(() => this.#cache.delete(key))
    }
    return ctx
  }

  async #mint(host: string): Promise<SecureContext> {
    return createSecureContext(await this.pemFor(host))
  }

  /** Signs a fresh leaf for `host` (uncached): key and certificate chain as PEM. */
  async pemFor(host: string): Promise<{ key: string; cert: string }> {
    this.#leafKeys ??= (async () => {
      const keys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as CryptoKeyPair
      return { keys, keyPem: pkcs8Pem(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey)) }
    })()
    this.#issuer ??= loadX509().then((x509) => ({ x509, cert: new x509.X509Certificate(this.#ca.certPem) }))
    const [{ keys, keyPem }, { x509, cert: ca }] = await Promise.all([this.#leafKeys, this.#issuer])
    const now = Date.now()
    const san = isIP(host) ? { type: 'ip' as const, value: host } : { type: 'dns' as const, value: host }
    const leaf = await x509.X509CertificateGenerator.create({
      serialNumber: randomSerial(),
      subject: `CN=${cnSafe(host)}`,
      issuer: ca.subject,
      notBefore: new Date(now - LEAF_BACKDATE_MS),
      notAfter: new Date(Math.min(now + LEAF_LIFETIME_MS, ca.notAfter.getTime())),
      publicKey: keys.publicKey,
      signingKey: this.#ca.privateKey,
      signingAlgorithm: ALG,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
        new x509.SubjectAlternativeNameExtension([san]),
      ],
    })
    this.minted++
    return { key: keyPem, cert: leaf.toString('pem') + '\n' + this.#ca.certPem }
  }
}

/** Lowercase, no trailing dot, no IPv6 brackets: the form SANs and the policy use. */
export function normalizeHost(host: string): string {
  let h = host.trim().toLowerCase()
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1)
  if (h.endsWith('.')) h = h.slice(0, -1)
  return h
}

/** Fingerprint for operators comparing what a sandbox trusts with what the proxy presents. */
export function caFingerprint(ca: CorralCa): string {
  return new NodeX509(ca.certPem).fingerprint256
}

function cnSafe(host: string): string {
  // Hostnames reaching here came from SNI or CONNECT; still keep DN syntax characters out.
  return host.replace(/[,+"\\<>;=]/g, '_').slice(0, 64)
}

function randomSerial(): string {
  const bytes = webcrypto.getRandomValues(new Uint8Array(16))
  bytes[0] = bytes[0]! & 0x7f // positive INTEGER
  return Buffer.from(bytes).toString('hex')
}

function pkcs8Pem(der: ArrayBuffer): string {
  const b64 = Buffer.from(der).toString('base64').replace(/(.{64})/g, '$1\n').replace(/\n$/, '')
  return `-----BEGIN PRIVATE KEY-----\n${b64}\n-----END PRIVATE KEY-----\n`
}
