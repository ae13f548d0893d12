// A small client for the OCI distribution API (https://github.com/opencontainers/distribution-spec)
// over undici: resolve a reference, read a manifest (an image index resolves to linux/amd64 or its
// only image), stream blobs with their digest and size verified, push blobs (one monolithic PUT)
// and manifests. No npm registry client was solid enough to adopt (the ones published target the
// Docker v2 API of 2016 and pull in request/bunyan). Auth: anonymous, then on a 401 the challenge
// the registry names — Basic with configured credentials, or Bearer with a token fetched from the
// realm (anonymously or with those credentials). Transport: HTTPS with the system CAs
// (NODE_EXTRA_CA_CERTS adds more); plain HTTP only for loopback hosts or hosts listed in
// CORRAL_REGISTRY_INSECURE; every connection address-checked (registry-transport.ts). Configuration and rules: docs/packs.md "Registry". References and
// RegistryError: registry-ref.ts; settings from the environment: registry-settings.ts.
import { createHash } from 'node:crypto'
import { isIP } from 'node:net'
import { Readable, Transform, type TransformCallback } from 'node:stream'
import { request, type Dispatcher } from 'undici'
import { RegistryError, formatImageRef, type ImageRef, type RegistryFailure } from './registry-ref.js'
import { RegistryTransport, refusalMessage } from './registry-transport.js'

export { RegistryError, formatImageRef, parseImageRef, type ImageRef, type RegistryFailure } from './registry-ref.js'

export const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json'
export const OCI_INDEX = 'application/vnd.oci.image.index.v1+json'
export const DOCKER_MANIFEST = 'application/vnd.docker.distribution.manifest.v2+json'
export const DOCKER_LIST = 'application/vnd.docker.distribution.manifest.list.v2+json'
const MANIFEST_ACCEPT = [OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST].join(', ')
/** Largest manifest or index read (the distribution spec suggests registries accept at least 4 MiB). */
const MAX_MANIFEST_BYTES = 4 * 1024 * 1024
const MAX_REDIRECTS = 5
const DIGEST_RE = /^sha256:[0-9a-f]{64}$/

export interface Descriptor {
  mediaType: string
  digest: string
  size: number
  annotations?: Record<string, string>
  platform?: { os?: string; architecture?: string; variant?: string }
}

export interface ImageManifest {
  schemaVersion: 2
  mediaType?: string
  config: Descriptor
  layers: Descriptor[]
  annotations?: Record<string, string>
}

export interface RegistryOptions {
  /** `host[:port]` names reached over plain HTTP although not loopback. */
  insecure?: Iterable<string>
  /** Credentials per `host[:port]`. */
  credentials?: ReadonlyMap<string, { username: string; password: string }>
  /** Per request: connect and header timeout (ms). Default 15 s. */
  timeoutMs?: number
  /** Where connections may go (registry-transport.ts); default: hops off the named registry address-checked. */
  transport?: RegistryTransport
}

interface Response { status: number; headers: Record<string, string | string[] | undefined>; body: Dispatcher.ResponseData['body'] }

export class RegistryClient {
  readonly #insecure: Set<string>
  readonly #credentials: ReadonlyMap<string, { username: string; password: string }>
  readonly #timeoutMs: number
  readonly transport: RegistryTransport
  /** Authorization header per registry and scope, learned from the last challenge. */
  readonly #auth = new Map<string, string>()

  constructor(opts: RegistryOptions = {}) {
    this.#insecure = new Set([...(opts.insecure ?? [])].map((h) => h.toLowerCase()))
    this.#credentials = opts.credentials ?? new Map()
    this.#timeoutMs = opts.timeoutMs ?? 15_000
    this.transport = opts.transport ?? new RegistryTransport()
  }

  /**
   * The image manifest `ref` names, with the digest of its bytes (for a reference through an
   * index: the chosen image's digest). Refuses a digest mismatch, other manifest types and
   * manifests without layers.
   */
  async getManifest(ref: ImageRef): Promise<{ manifest: ImageManifest; digest: string }> {
    const first = await this.#readManifest(ref, ref.digest ?? ref.tag ?? 'latest')
    if (first.mediaType === OCI_INDEX || first.mediaType === DOCKER_LIST) {
      const chosen = pickImage(first.json, formatImageRef(ref))
      const image = await this.#readManifest(ref, chosen.digest)
      if (image.mediaType === OCI_INDEX || image.mediaType === DOCKER_LIST) throw new RegistryError('invalid', `${formatImageRef(ref)}: an index inside an index is not supported`)
      return { manifest: checkManifest(image.json, formatImageRef(ref)), digest: image.digest }
    }
    return { manifest: checkManifest(first.json, formatImageRef(ref)), digest: first.digest }
  }

  async #readManifest(ref: ImageRef, reference: string): Promise<{ mediaType: string; json: unknown; digest: string }> {
    const res = await this.#send(ref, 'pull', 'GET', `/v2/${ref.repository}/manifests/${reference}`, { accept: MANIFEST_ACCEPT })
    if (res.status === 404) {
      await res.body.dump()
      throw new RegistryError('not_found', `${formatImageRef(ref)}: no manifest ${reference} in ${ref.registry}/${ref.repository}`)
    }
    await expectOk(res, `${formatImageRef(ref)}: reading manifest ${reference}`)
    const bytes = await readCapped(res.body, MAX_MANIFEST_BYTES, `${formatImageRef(ref)}: the manifest`)
    const digest = sha256(bytes)
    if (DIGEST_RE.test(reference) && digest !== reference) throw new RegistryError('invalid', `${formatImageRef(ref)}: the manifest's bytes hash to ${digest}, not ${reference}`)
    let json: { mediaType?: unknown }
    try {
      json = JSON.parse(bytes.toString('utf8')) as { mediaType?: unknown }
    } catch {
      throw new RegistryError('invalid', `${formatImageRef(ref)}: the manifest is not JSON`)
    }
    if (!isObject(json)) throw new RegistryError('invalid', `${formatImageRef(ref)}: the manifest is not a JSON object`)
    const header = String(res.headers['content-type'] ?? '').split(';')[0]!.trim()
    const mediaType = typeof json.mediaType === 'string' ? json.mediaType : header
    return { mediaType, json, digest }
  }

  /**
   * A blob's bytes as a stream that fails (RegistryError `invalid`) when they do not hash to the
   * descriptor's digest or differ from its size — checked before the stream ends, so a consumer
   * never sees the end of a corrupt blob as success.
   */
  async fetchBlob(ref: ImageRef, desc: Descriptor): Promise<Readable> {
    if (!DIGEST_RE.test(desc.digest)) throw new RegistryError('invalid', `${formatImageRef(ref)}: unsupported blob digest ${desc.digest} (sha256 only)`)
    const res = await this.#send(ref, 'pull', 'GET', `/v2/${ref.repository}/blobs/${desc.digest}`, {})
    if (res.status === 404) {
      await res.body.dump()
      throw new RegistryError('not_found', `${formatImageRef(ref)}: blob ${desc.digest} is missing from the registry`)
    }
    await expectOk(res, `${formatImageRef(ref)}: reading blob ${desc.digest}`)
    const check = new VerifyBlob(desc, formatImageRef(ref))
    res.body.on('error', (err) => check.destroy(unreachable(ref, err)))
    return res.body.pipe(check)
  }

  /** Whether the repository already has the blob (a push then skips it). */
  async hasBlob(ref: ImageRef, digest: string): Promise<boolean> {
    const res = await this.#send(ref, 'push', 'HEAD', `/v2/${ref.repository}/blobs/${digest}`, {})
    await res.body.dump()
    if (res.status === 404) return false
    await expectOk(res, `${formatImageRef(ref)}: checking blob ${digest}`)
    return true
  }

  /** Uploads a blob in one PUT (`body()` may be called once per attempt); skips blobs already there. */
  async pushBlob(ref: ImageRef, desc: { digest: string; size: number }, body: () => Readable | Buffer): Promise<void> {
    if (await this.hasBlob(ref, desc.digest)) return
    const start = await this.#send(ref, 'push', 'POST', `/v2/${ref.repository}/blobs/uploads/`, { 'content-length': '0' })
    await expectOk(start, `${formatImageRef(ref)}: starting a blob upload`)
    await start.body.dump()
    const location = start.headers.location
    if (typeof location !== 'string') throw new RegistryError('invalid', `${formatImageRef(ref)}: the registry started an upload without a Location`)
    const url = resolveLocation(location, this.#base(ref), `${formatImageRef(ref)}: the upload's Location`)
    url.searchParams.set('digest', desc.digest)
    const put = await this.#send(ref, 'push', 'PUT', url.toString(), { 'content-type': 'application/octet-stream', 'content-length': String(desc.size) }, body)
    await expectOk(put, `${formatImageRef(ref)}: uploading blob ${desc.digest}`)
    await put.body.dump()
  }

  /** PUTs a manifest under `reference` (a tag); resolves with the digest of its bytes. */
  async putManifest(ref: ImageRef, reference: string, bytes: Buffer, mediaType: string): Promise<string> {
    const res = await this.#send(ref, 'push', 'PUT', `/v2/${ref.repository}/manifests/${reference}`, { 'content-type': mediaType, 'content-length': String(bytes.length) }, () => bytes)
    await expectOk(res, `${formatImageRef(ref)}: pushing the manifest`)
    await res.body.dump()
    return sha256(bytes)
  }

  /**
   * Deletes the manifest `digest` (and the tags on it). Resolves false when the registry does not
   * allow deletes (distribution answers 405 UNSUPPORTED unless storage.delete is enabled) or the
   * manifest is already gone.
   */
  async deleteManifest(ref: ImageRef, digest: string): Promise<boolean> {
    const res = await this.#send(ref, 'push', 'DELETE', `/v2/${ref.repository}/manifests/${digest}`, {})
    if (res.status === 404 || res.status === 405) {
      await res.body.dump()
      return false
    }
    await expectOk(res, `${formatImageRef(ref)}: deleting manifest ${digest}`)
    await res.body.dump()
    return true
  }

  #base(ref: ImageRef): string {
    return `${this.#plainHttp(ref.registry) ? 'http' : 'https'}://${ref.registry}`
  }

  #plainHttp(registry: string): boolean {
    if (this.#insecure.has(registry)) return true
    const host = hostOf(registry)
    return host === 'localhost' || (isIP(host) === 4 && host.startsWith('127.')) || host === '::1'
  }

  /**
   * One request with auth: a 401 answers with a challenge, which is met once (Basic with the
   * registry's credentials, or a Bearer token for the repository's scope) and the request
   * retried. Credentials go to the registry's origin only: not along redirects, nor to an upload's Location elsewhere.
   */
  async #send(ref: ImageRef, action: 'pull' | 'push', method: Dispatcher.HttpMethod, path: string, headers: Record<string, string>, body?: () => Readable | Buffer): Promise<Response> {
    const scope = `repository:${ref.repository}:${action === 'push' ? 'pull,push' : 'pull'}`
    const key = `${ref.registry} ${scope}`
    const url = new URL(path, this.#base(ref)).toString()
    const own = new URL(url).origin === new URL(this.#base(ref)).origin
    let res = await this.#request(ref, method, url, { ...headers, ...(own ? this.#authHeader(key) : {}) }, body?.())
    if (res.status === 401 && own) {
      const challenge = res.headers['www-authenticate']
      await res.body.dump()
      const auth = await this.#answer(ref, typeof challenge === 'string' ? challenge : '', scope)
      this.#auth.set(key, auth)
      res = await this.#request(ref, method, url, { ...headers, authorization: auth }, body?.())
      if (res.status === 401) {
        await res.body.dump()
        throw new RegistryError('denied', `${formatImageRef(ref)}: the registry refused the credentials (401)`)
      }
    }
    for (let hops = 0; (res.status === 307 || res.status === 302 || res.status === 303 || res.status === 301) && method === 'GET'; hops++) {
      const location = res.headers.location
      await res.body.dump()
      if (hops >= MAX_REDIRECTS || typeof location !== 'string') throw new RegistryError('invalid', `${formatImageRef(ref)}: too many redirects`)
      res = await this.#request(ref, 'GET', resolveLocation(location, this.#base(ref), `${formatImageRef(ref)}: the redirect's Location`).toString(), headers.accept ? { accept: headers.accept } : {})
    }
    if (res.status === 403) {
      await res.body.dump()
      throw new RegistryError('denied', `${formatImageRef(ref)}: the registry denied ${action} access (403)`)
    }
    return res
  }

  #authHeader(key: string): Record<string, string> {
    const auth = this.#auth.get(key)
    return auth ? { authorization: auth } : {}
  }

  async #answer(ref: ImageRef, challenge: string, scope: string): Promise<string> {
    const creds = this.#credentials.get(ref.registry)
    const basic = creds ? `Basic ${Buffer.from(`${creds.username}:${creds.password}`).toString('base64')}` : undefined
    const scheme = challenge.split(/\s+/, 1)[0]!.toLowerCase()
    if (scheme === 'basic') {
      if (!basic) throw new RegistryError('denied', `${formatImageRef(ref)}: the registry requires credentials (none configured for ${ref.registry})`)
      return basic
    }
    if (scheme !== 'bearer') throw new RegistryError('denied', `${formatImageRef(ref)}: the registry answered 401 without a supported challenge`)
    const params = challengeParams(challenge)
    if (!params.realm) throw new RegistryError('invalid', `${formatImageRef(ref)}: the Bearer challenge names no realm`)
    const url = resolveLocation(params.realm, undefined, `${formatImageRef(ref)}: the token realm`)
    if (url.protocol !== 'https:' && !(url.protocol === 'http:' && this.#plainHttp(url.host))) {
      throw new RegistryError('invalid', `${formatImageRef(ref)}: the token realm ${url.origin} is not HTTPS`)
    }
    if (params.service) url.searchParams.set('service', params.service)
    url.searchParams.set('scope', scope)
    const res = await this.#request(ref, 'GET', url.toString(), basic ? { authorization: basic } : {})
    if (res.status === 401 || res.status === 403) {
      await res.body.dump()
      throw new RegistryError('denied', `${formatImageRef(ref)}: the token service refused ${creds ? 'the credentials' : 'anonymous access'} (${res.status})`)
    }
    await expectOk(res, `${formatImageRef(ref)}: fetching a registry token`)
    let json: unknown
    try {
      json = JSON.parse((await readCapped(res.body, 1024 * 1024, 'the token response')).toString('utf8'))
    } catch (err) {
      if (err instanceof RegistryError) throw err
      throw new RegistryError('invalid', `${formatImageRef(ref)}: the token response is not JSON`)
    }
    const token = isObject(json) ? (json.token ?? json.access_token) : undefined
    if (typeof token !== 'string' || token === '') throw new RegistryError('invalid', `${formatImageRef(ref)}: the token service returned no token`)
    return `Bearer ${token}`
  }

  /** One HTTP exchange, its connection checked by the transport (registry-transport.ts) for an image of `ref`. */
  async #request(ref: ImageRef, method: Dispatcher.HttpMethod, url: string, headers: Record<string, string>, body?: Readable | Buffer): Promise<Response> {
    const target = new URL(url)
    try {
      const res = await request(target, {
        method, headers: { 'user-agent': 'corral', ...headers }, ...(body !== undefined ? { body } : {}),
        headersTimeout: this.#timeoutMs, bodyTimeout: 5 * this.#timeoutMs, dispatcher: this.transport.dispatcherFor(target, ref.registry),
      })
      return { status: res.statusCode, headers: res.headers, body: res.body }
    } catch (err) {
      const refused = refusalMessage(err, `${formatImageRef(ref)}: ${target.host}`)
      if (refused) throw new RegistryError('not_allowed', refused)
      throw new RegistryError('unreachable', `${target.host}: the registry is unreachable (${describe(err)})`)
    }
  }
}

/** A JSON value that is an object (not null, not an array). */
function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** A URL the registry sent (Location, token realm), or RegistryError `invalid` naming `what`. */
function resolveLocation(location: string, base: string | undefined, what: string): URL {
  try {
    return new URL(location, base)
  } catch {
    throw new RegistryError('invalid', `${what} ${JSON.stringify(location.slice(0, 200))} is not a URL`)
  }
}

/** The image of an index: linux/amd64 (attestation entries skipped), else the only entry. */
function pickImage(index: unknown, ref: string): Descriptor {
  const manifests = isObject(index) ? index.manifests : undefined
  if (!Array.isArray(manifests) || manifests.length === 0) throw new RegistryError('invalid', `${ref}: the image index lists no manifests`)
  const images = (manifests as Descriptor[]).filter((m) => isObject(m) && typeof m.digest === 'string' && m.platform?.os !== 'unknown')
  const amd64 = images.find((m) => m.platform?.os === 'linux' && m.platform.architecture === 'amd64')
  const chosen = amd64 ?? (images.length === 1 ? images[0] : undefined)
  if (!chosen) throw new RegistryError('invalid', `${ref}: the image index has no linux/amd64 image and more than one entry`)
  if (!DIGEST_RE.test(chosen.digest)) throw new RegistryError('invalid', `${ref}: the index entry's digest ${chosen.digest} is not sha256`)
  return chosen
}

function checkManifest(json: unknown, ref: string): ImageManifest {
  const m = json as Partial<ImageManifest>
  const mediaType = m.mediaType ?? OCI_MANIFEST
  if (m.schemaVersion !== 2 || (mediaType !== OCI_MANIFEST && mediaType !== DOCKER_MANIFEST)) {
    throw new RegistryError('invalid', `${ref}: not an OCI or Docker v2 image manifest (schemaVersion ${String(m.schemaVersion)}, ${mediaType})`)
  }
  const isDescriptor = (d: unknown): d is Descriptor => {
    const x = d as Descriptor
    return !!x && typeof x.mediaType === 'string' && typeof x.digest === 'string' && Number.isSafeInteger(x.size) && x.size >= 0
  }
  if (!isDescriptor(m.config) || !Array.isArray(m.layers) || !m.layers.every(isDescriptor)) throw new RegistryError('invalid', `${ref}: the manifest's config or layers are malformed`)
  if (m.layers.length === 0) throw new RegistryError('invalid', `${ref}: the image has no layers`)
  return m as ImageManifest
}

/** Parses `Bearer realm="…",service="…",scope="…"`. */
function challengeParams(challenge: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const m of challenge.matchAll(/([A-Za-z]+)="([^"]*)"/g)) out[m[1]!.toLowerCase()] = m[2]!
  return out
}

function hostOf(registry: string): string {
  if (registry.startsWith('[')) return registry.slice(1, registry.indexOf(']'))
  return registry.split(':')[0]!
}

async function expectOk(res: Response, what: string): Promise<void> {
  if (res.status >= 200 && res.status < 300) return
  const text = (await readCapped(res.body, 64 * 1024, 'the error body').catch(() => Buffer.alloc(0))).toString('utf8')
  let detail = ''
  try {
    const errors = (JSON.parse(text) as { errors?: { code?: string; message?: string }[] }).errors
    if (errors?.[0]) detail = `: ${errors[0].code ?? ''} ${errors[0].message ?? ''}`.trimEnd()
  } catch {
    // Not the distribution error format; the status says enough.
  }
  // 5xx and 429 are the registry's trouble (retry later), not the image's.
  const kind: RegistryFailure = res.status >= 500 || res.status === 429 ? 'unreachable' : res.status === 404 ? 'not_found' : 'invalid'
  throw new RegistryError(kind, `${what} failed (HTTP ${res.status}${detail})`)
}

async function readCapped(body: AsyncIterable<Buffer>, max: number, what: string): Promise<Buffer> {
  const chunks: Buffer[] = []
  let n = 0
  for await (const chunk of body) {
    n += chunk.length
    if (n > max) {
      if ('destroy' in body && typeof body.destroy === 'function') body.destroy()
      throw new RegistryError('invalid', `${what} is larger than ${max} bytes`)
    }
    chunks.push(chunk)
  }
  return Buffer.concat(chunks)
}

export function sha256(bytes: Buffer): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`
}

function describe(err: unknown): string {
  const e = err as { code?: string; message?: string; cause?: { code?: string; message?: string } }
  return e.cause?.code ?? e.code ?? e.cause?.message ?? e.message ?? String(err)
}

function unreachable(ref: ImageRef, err: unknown): RegistryError {
  return err instanceof RegistryError ? err : new RegistryError('unreachable', `${ref.registry}: the connection broke while reading a blob (${describe(err)})`)
}

/** Passes a blob through, failing at the end when its size or sha256 differ from the descriptor. */
class VerifyBlob extends Transform {
  readonly #hash = createHash('sha256')
  #size = 0
  constructor(readonly desc: Descriptor, readonly ref: string) {
    super()
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.#size += chunk.length
    if (this.#size > this.desc.size) return done(new RegistryError('invalid', `${this.ref}: blob ${this.desc.digest} is larger than its descriptor's ${this.desc.size} bytes`))
    this.#hash.update(chunk)
    done(null, chunk)
  }
  override _flush(done: TransformCallback): void {
    const digest = `sha256:${this.#hash.digest('hex')}`
    if (this.#size !== this.desc.size || digest !== this.desc.digest) {
      return done(new RegistryError('invalid', `${this.ref}: blob ${this.desc.digest} does not match its digest or size (got ${digest}, ${this.#size} bytes)`))
    }
    done()
  }
}

/** A Buffer as a one-shot stream (for pushBlob bodies built in memory). */
export function bufferBody(bytes: Buffer): () => Readable {
  return () => Readable.from([bytes])
}
