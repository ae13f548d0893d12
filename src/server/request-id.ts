// Request ids are ours, never taken from a client header: `req_` + a UUIDv7 without dashes, so
// ids sort by time in logs. They appear on every log line, in the envelope and in `x-request-id`.
import { v7 as uuidv7 } from 'uuid'

export const REQUEST_ID_HEADER = 'x-request-id'

export function mintRequestId(): string {
  return `req_${uuidv7().replaceAll('-', '')}`
}
