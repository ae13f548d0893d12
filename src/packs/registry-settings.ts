// Registry settings from the environment: where serve pushes pack images and which registries
// pulls may reach (docs/packs.md "Registry").
import { readFileSync } from 'node:fs'
import { RegistryClient } from './registry.js'
import { RegistryError, parseImageRef, type ImageRef } from './registry-ref.js'
import { RegistryTransport, registryAllowPrivate } from './registry-transport.js'

/** Where serve pushes pack images, and which registries pulls may reach (docs/packs.md "Registry"). */
export interface RegistrySettings {
  /** CORRAL_PACK_REGISTRY: `host[:port]/namespace` (namespace optional). */
  push?: { registry: string; namespace: string }
  /** Hosts pulls may reach: CORRAL_REGISTRY_ALLOW plus the push registry; `*` allows any host. */
  allow: '*' | ReadonlySet<string>
  client: RegistryClient
}

/**
 * Reads CORRAL_PACK_REGISTRY, CORRAL_REGISTRY_ALLOW, CORRAL_REGISTRY_INSECURE,
 * CORRAL_REGISTRY_ALLOW_PRIVATE and CORRAL_REGISTRY_AUTH_FILE (a Docker-style config.json
 * `{"auths": {"host": {"auth": "<base64 user:password>"}}}` or with `username`/`password`).
 * Throws a plain Error naming the variable. The registries named here may be at any address; a
 * redirect, token realm or upload Location elsewhere is address-checked (registry-transport.ts),
 * and so is the registry a reference names under `CORRAL_REGISTRY_ALLOW=*`: `*` opens public hosts.
 */
export function registrySettingsFromEnv(env: NodeJS.ProcessEnv = process.env): RegistrySettings {
  const list = (v: string | undefined) => (v ?? '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean)
  let push: RegistrySettings['push']
  const raw = env.CORRAL_PACK_REGISTRY?.trim()
  if (raw) {
    const slash = raw.indexOf('/')
    const registry = (slash < 0 ? raw : raw.slice(0, slash)).toLowerCase()
    const namespace = slash < 0 ? '' : raw.slice(slash + 1).replace(/\/+$/, '')
    try {
      parseImageRef(`${registry}/${namespace ? `${namespace}/` : ''}x`)
    } catch {
      throw new Error(`CORRAL_PACK_REGISTRY must be host[:port][/namespace] (lower-case namespace), got ${raw}`)
    }
    push = { registry, namespace }
  }
  const allowed = list(env.CORRAL_REGISTRY_ALLOW)
  const allow: RegistrySettings['allow'] = allowed.includes('*') ? '*' : new Set([...allowed, ...(push ? [push.registry] : [])])
  const credentials = new Map<string, { username: string; password: string }>()
  if (env.CORRAL_REGISTRY_AUTH_FILE) {
    let auths: Record<string, { auth?: string; username?: string; password?: string }>
    try {
      auths = (JSON.parse(readFileSync(env.CORRAL_REGISTRY_AUTH_FILE, 'utf8')) as { auths?: typeof auths }).auths ?? {}
    } catch (err) {
      throw new Error(`CORRAL_REGISTRY_AUTH_FILE ${env.CORRAL_REGISTRY_AUTH_FILE} cannot be read as a Docker config.json (${(err as Error).message})`)
    }
    for (const [host, a] of Object.entries(auths)) {
      const pair = a.auth ? Buffer.from(a.auth, 'base64').toString('utf8') : `${a.username ?? ''}:${a.password ?? ''}`
      const i = pair.indexOf(':')
      if (i > 0) credentials.set(host.replace(/^https?:\/\//, '').replace(/\/.*$/, '').toLowerCase(), { username: pair.slice(0, i), password: pair.slice(i + 1) })
    }
  }
  const transport = new RegistryTransport({
    trusted: [...allowed.filter((h) => h !== '*'), ...(push ? [push.registry] : [])], trustNamed: false, allowPrivate: registryAllowPrivate(env),
  })
  return { ...(push ? { push } : {}), allow, client: new RegistryClient({ insecure: list(env.CORRAL_REGISTRY_INSECURE), credentials, transport }) }
}

/** Refuses a pull from a registry host the settings do not allow (the server fetches what users name). */
export function checkAllowed(settings: RegistrySettings, ref: ImageRef): void {
  if (settings.allow === '*' || settings.allow.has(ref.registry)) return
  throw new RegistryError('not_allowed', `${ref.registry} is not an allowed pack registry (CORRAL_REGISTRY_ALLOW${settings.push ? `; ${settings.push.registry} is` : ''})`)
}
