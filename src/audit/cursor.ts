// Opaque audit cursors: the keyset position (ts, id) of the last row of a page, bound by HMAC to
// the org and the normalised query, so a cursor that was edited, or comes from another query or
// org, is refused with invalid_cursor instead of silently returning a different result. The key
// is generated once per store (settings, first writer wins across replicas).

import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import { CorralError } from '../contract/index.js'
import type { Store } from '../store/index.js'

const KEY_SETTING = 'audit.cursor_hmac_key'
const keys = new WeakMap<Store, Promise<Buffer>>()

function cursorKey(store: Store): Promise<Buffer> {
  let key = keys.get(store)
  if (!key) {
    key = store.settings.setIfAbsent(KEY_SETTING, randomBytes(32).toString('base64url')).then((v) => Buffer.from(v, 'base64url'))
    key.catch(() => keys.delete(store))
    keys.set(store, key)
  }
  return key
}

export interface CursorPosition {
  ts: number
  id: string
}

function mac(key: Buffer, binding: string, body: string): Buffer {
  return createHmac('sha256', key).update(binding).update('\n').update(body).digest().subarray(0, 16)
}

export async function encodeCursor(store: Store, binding: string, pos: CursorPosition): Promise<string> {
  const body = Buffer.from(JSON.stringify([pos.ts, pos.id])).toString('base64url')
  return `${body}.${mac(await cursorKey(store), binding, body).toString('base64url')}`
}

export async function decodeCursor(store: Store, binding: string, cursor: string): Promise<CursorPosition> {
  const bad = () => new CorralError('invalid_cursor', 'cursor is malformed or does not belong to this query; pass back the cursor of the previous page verbatim', 400)
  if (typeof cursor !== 'string' || cursor.length > 512) throw bad()
  const [body, sig, extra] = cursor.split('.')
  if (!body || !sig || extra !== undefined || !/^[A-Za-z0-9_-]+$/.test(body) || !/^[A-Za-z0-9_-]+$/.test(sig)) throw bad()
  const expected = mac(await cursorKey(store), binding, body)
  const given = Buffer.from(sig, 'base64url')
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw bad()
  let parsed: unknown
  try {
    parsed = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'))
  } catch {
    throw bad()
  }
  if (!Array.isArray(parsed) || parsed.length !== 2 || !Number.isSafeInteger(parsed[0]) || typeof parsed[1] !== 'string') throw bad()
  return { ts: parsed[0] as number, id: parsed[1] as string }
}
