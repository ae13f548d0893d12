// Image references (`host[:port]/repository[:tag][@sha256:…]`) and the registry client's error:
// parsed and printed without any I/O, so the settings, the pack service and the client share them.

const DIGEST_RE = /^sha256:[0-9a-f]{64}$/
// distribution's reference grammar, simplified: lower-case path components separated by / . _ -.
const REPO_RE = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$/
const TAG_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/
const HOST_RE = /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$/

/** Why a registry operation failed: the route maps `unreachable` to 502, everything else to a 400 on image_ref. */
export type RegistryFailure = 'reference' | 'not_allowed' | 'not_found' | 'denied' | 'invalid' | 'unreachable'

export class RegistryError extends Error {
  constructor(readonly kind: RegistryFailure, message: string) {
    super(message)
    this.name = 'RegistryError'
  }
}

export interface ImageRef {
  /** `host[:port]`, as written (lower-cased). */
  registry: string
  repository: string
  tag?: string
  digest?: string
}

/**
 * Parses `host[:port]/repo[:tag][@sha256:…]`. The host part is required (no implicit docker.io:
 * a pack names the registry it comes from); without tag or digest the tag is `latest`.
 */
export function parseImageRef(ref: string): ImageRef {
  const bad = (why: string) => new RegistryError('reference', `${JSON.stringify(ref)} is not an image reference (${why}); expected host[:port]/repository[:tag|@sha256:…]`)
  if (ref.length > 1024 || /\s/.test(ref)) throw bad('too long or has spaces')
  let rest = ref
  let digest: string | undefined
  const at = rest.indexOf('@')
  if (at >= 0) {
    digest = rest.slice(at + 1)
    rest = rest.slice(0, at)
    if (!DIGEST_RE.test(digest)) throw bad('the digest must be sha256: and 64 lower-case hex digits')
  }
  const slash = rest.indexOf('/')
  if (slash <= 0) throw bad('no registry host')
  const registry = rest.slice(0, slash).toLowerCase()
  if (!HOST_RE.test(registry) || !(registry.includes('.') || registry.includes(':') || registry === 'localhost')) throw bad('the first component must be a registry host such as registry.example.com or 127.0.0.1:5000')
  let repository = rest.slice(slash + 1)
  let tag: string | undefined
  const colon = repository.lastIndexOf(':')
  if (colon >= 0) {
    tag = repository.slice(colon + 1)
    repository = repository.slice(0, colon)
    if (!TAG_RE.test(tag)) throw bad('bad tag')
  }
  if (!REPO_RE.test(repository) || repository.length > 255) throw bad('bad repository name (lower-case letters, digits, . _ - and /)')
  if (tag === undefined && digest === undefined) tag = 'latest'
  return { registry, repository, ...(tag !== undefined ? { tag } : {}), ...(digest !== undefined ? { digest } : {}) }
}

/** `host/repo:tag`, `host/repo@digest` or both, the canonical text of a reference. */
export function formatImageRef(r: ImageRef): string {
  return `${r.registry}/${r.repository}${r.tag !== undefined ? `:${r.tag}` : ''}${r.digest !== undefined ? `@${r.digest}` : ''}`
}
