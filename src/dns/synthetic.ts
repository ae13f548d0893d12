// The synthetic addresses of one workspace: each name the workspace looks up gets an address of
// its own from SYNTHETIC_CIDR, so a connection to that address tells the proxy which name was
// meant. Every workspace has its own network namespace, so every workspace draws from the same
// range; the table is per workspace and an address means nothing outside the workspace that was
// handed it (an address another workspace holds is unknown here, and refused).

/** The reserved range the resolver answers from (RFC 6598 shared address space, never routed to a host of ours). */
export const SYNTHETIC_CIDR = '100.64.0.0/10'
const BASE = (100 << 24) | (64 << 16)
const SIZE = 1 << 22

/** Whether `address` (dotted IPv4) lies in the synthetic range. */
export function isSynthetic(address: string): boolean {
  const n = ipv4ToInt(address)
  return n !== undefined && n >= BASE >>> 0 && n < (BASE >>> 0) + SIZE
}

export function ipv4ToInt(address: string): number | undefined {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(address)
  if (!m) return undefined
  const parts = m.slice(1).map(Number)
  if (parts.some((p) => p > 255)) return undefined
  return ((parts[0]! << 24) | (parts[1]! << 16) | (parts[2]! << 8) | parts[3]!) >>> 0
}

function intToIpv4(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.')
}

/**
 * Name ↔ address for one workspace. Addresses are never reused while the table lives: a name
 * keeps its address for the workspace's life in this proxy, so a connection opened long after the
 * lookup still names the name that was looked up. When the table is full, new names are refused
 * rather than evicting old ones (an evicted address handed to a new name would let an old
 * connection reach a name it never resolved).
 */
export class SyntheticTable {
  readonly #byName = new Map<string, string>()
  readonly #byAddress = new Map<string, string>()
  /** A random start, so two workspaces' first names rarely share an address (it would mean nothing if they did). */
  #next: number

  constructor(readonly maxNames: number, start = Math.floor(Math.random() * (SIZE / 2))) {
    this.#next = start
  }

  get size(): number {
    return this.#byName.size
  }

  /** The name's address, allocating one; undefined when the table is full. */
  addressOf(name: string): string | undefined {
    const held = this.#byName.get(name)
    if (held) return held
    if (this.#byName.size >= this.maxNames) return undefined
    // Skip the network and broadcast-looking .0 and .255 addresses: some clients refuse them.
    let n: number
    do n = (BASE >>> 0) + (this.#next++ % SIZE)
    while ((n & 255) === 0 || (n & 255) === 255 || this.#byAddress.has(intToIpv4(n)))
    const address = intToIpv4(n)
    this.#byName.set(name, address)
    this.#byAddress.set(address, name)
    return address
  }

  /** The name an address was handed out for, if this table handed it out. */
  nameOf(address: string): string | undefined {
    return this.#byAddress.get(address)
  }
}
