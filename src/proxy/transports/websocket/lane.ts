// One direction of a relayed WebSocket (relay.ts): the steps its source leg's parser handed on, in
// wire order, and the message it is relaying now (its type, whether a frame of it went out, the
// scrubber's scan over it, the copy a `websocket.message` counter reads).
import type { BodyScan } from '../../scrub.js'

export type Leg = 'agent' | 'upstream'
export type Direction = 'to_upstream' | 'to_agent'

export interface Flow {
  messages: number
  /** Data frames read from the sender (before the relay re-frames them). */
  frames: number
  bytes: number
}

export type Step = { kind: 'start'; text: boolean } | { kind: 'data'; chunk: Buffer; end: boolean } | { kind: 'ping'; payload: Buffer } | { kind: 'close'; payload: Buffer }

/** One direction: its ordered steps, and the message it is relaying. */
export interface Lane {
  readonly dir: Direction
  readonly from: Leg
  readonly to: Leg
  readonly steps: Step[]
  /** Waiting on the ledger: the source leg is paused. */
  busy: boolean
  /** The destination has more than HIGH_WATER queued: the source leg is paused. */
  blocked: boolean
  readonly flow: Flow
  text: boolean
  /** A frame of the current message went out: the next one is a continuation. */
  sent: boolean
  scan: BodyScan | undefined
  /** The copy a `websocket.message` counter reads at the message's end (text messages only). */
  copy: Buffer[] | undefined
  copied: number
}

export function lane(dir: Direction, from: Leg, to: Leg): Lane {
  return { dir, from, to, steps: [], busy: false, blocked: false, flow: { messages: 0, frames: 0, bytes: 0 }, text: false, sent: false, scan: undefined, copy: undefined, copied: 0 }
}
