// The request as CEL sees it (the `request`, `workspace` and `task` variables) and the small
// request helpers the evaluators share: query parsing and editing, media types, JSON merge.
// Pure; split from policy.ts, which evaluates.

import { normalizeHost } from './glob.js'
import type { HeaderMap, PolicyContext, PolicyRequest } from './types.js'

const EMPTY_WS = Object.freeze({ id: '', org_id: '', role: '', environment: '' })
const NO_TASK = Object.freeze({ id: '' })

export function joinHeaders(h: HeaderMap): Record<string, string> {
  const out: Record<string, string> = {}
  for (const k in h) {
    const v = h[k]
    out[k.toLowerCase()] = typeof v === 'string' ? v : v.join(', ')
  }
  return out
}

export function decodeComponent(s: string): string {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '))
  } catch {
    return s
  }
}

export function parseQuery(raw: string): Record<string, string[]> {
  const out: Record<string, string[]> = {}
  if (raw === '') return out
  for (const part of raw.split('&')) {
    if (part === '') continue
    const i = part.indexOf('=')
    const k = decodeComponent(i < 0 ? part : part.slice(0, i))
    const v = i < 0 ? '' : decodeComponent(part.slice(i + 1))
    ;(out[k] ??= []).push(v)
  }
  return out
}

/** CEL `request` variable (body added only where the site opts in). */
export function requestVar(req: PolicyRequest, body?: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {
    method: req.method.toUpperCase(),
    path: req.path,
    host: normalizeHost(req.host, req.scheme),
    scheme: req.scheme,
    headers: joinHeaders(req.headers),
    raw_query: req.rawQuery,
    query: parseQuery(req.rawQuery),
  }
  if (body !== undefined) out.body = body
  return out
}

/** The variables of a request-site expression: `request` (its `body` where the site opts in), `workspace` and `task`. */
export function celVars(req: PolicyRequest, ctx: PolicyContext, body?: unknown): Record<string, unknown> {
  return { request: requestVar(req, body), workspace: ctx.workspace ?? EMPTY_WS, task: ctx.task ? { id: ctx.task.id ?? '' } : NO_TASK }
}

export function mediaType(headers: HeaderMap): string {
  const v = headers['content-type']
  const s = (typeof v === 'string' ? v : v?.[0]) ?? ''
  const semi = s.indexOf(';')
  return (semi < 0 ? s : s.slice(0, semi)).trim().toLowerCase()
}

export function isJsonType(t: string): boolean {
  return t === 'application/json' || (t.startsWith('application/') && t.endsWith('+json'))
}

export function bodyText(body: Uint8Array | string): string {
  return typeof body === 'string' ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8')
}

export function deepMerge(target: unknown, patch: Record<string, unknown>): Record<string, unknown> {
  const base: Record<string, unknown> = target && typeof target === 'object' && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {}
  for (const [k, v] of Object.entries(patch)) {
    base[k] = v && typeof v === 'object' && !Array.isArray(v) ? deepMerge(base[k], v as Record<string, unknown>) : v
  }
  return base
}

export function encodeQueryComponent(s: string): string {
  return encodeURIComponent(s)
}

export function setQuery(raw: string, key: string, value: string | undefined): string {
  const parts = raw === '' ? [] : raw.split('&').filter((p) => p !== '' && decodeComponent(p.split('=')[0]) !== key)
  if (value !== undefined) parts.push(`${encodeQueryComponent(key)}=${encodeQueryComponent(value)}`)
  return parts.join('&')
}
