// Prefixed, time-sortable ids: `<prefix>_` + a UUIDv7 without dashes (creation order = id order).
import { v7 as uuidv7 } from 'uuid'

export function newId(prefix: string): string {
  return `${prefix}_${uuidv7().replaceAll('-', '')}`
}

/** Now as RFC 3339 UTC with millisecond precision: the one date-time format every table stores. */
export function nowIso(): string {
  return new Date().toISOString()
}
