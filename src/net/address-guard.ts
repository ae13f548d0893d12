// The address check of every server-side connection (docs/security.md "Destinations"): the proxy's
// upstreams and the OAuth client's calls to providers (src/secrets/oauth/client.ts). A policy names
// hosts; what the proxy dials is an address, chosen by DNS that an attacker may control. So the
// check runs where the socket is made (a custom `lookup` for names, a direct check for literals),
// on every address the resolver returned, each time a connection opens: a rebinding answer is
// checked like the first one. Refused: loopback, link-local, private, CGNAT, unique-local,
// multicast, unspecified, broadcast and reserved ranges (also when embedded in IPv6: mapped,
// compatible, NAT64, 6to4) unless the matched rule names the range in `allow_private`; and serve's
// own listeners (API, proxy, database) whatever the policy says.
import { type LookupAddress } from 'node:dns'
import { lookup as dnsLookupAll } from 'node:dns/promises'
import { BlockList, isIP, isIPv4 } from 'node:net'
import { networkInterfaces } from 'node:os'

/** A listener of serve itself: never reachable through the proxy. */
export interface Endpoint {
  host: string
  port: number
}

/** Thrown (as the socket's error) when a connection would reach a refused address. */
export class DestinationRefused extends Error {
  readonly code = 'CORRAL_DESTINATION_REFUSED'
  constructor(
    readonly address: string,
    readonly port: number,
    /** True when the address:port is one of serve's own listeners (no policy can allow it). */
    readonly own: boolean,
  ) {
    super(own ? `${address}:${port} is a listener of corral serve` : `${address} is a private or special-purpose address`)
    this.name = 'DestinationRefused'
  }
}

/** Finds a DestinationRefused in an error or its `cause` chain (undici may wrap socket errors). */
export function destinationRefusal(err: unknown): DestinationRefused | undefined {
  for (let e = err, i = 0; e && i < 5; e = (e as { cause?: unknown }).cause, i++) if (e instanceof DestinationRefused) return e
  return undefined
}

const SPECIAL_V4: readonly [string, number][] = [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.88.99.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24],
  ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
]
const SPECIAL_V6: readonly [string, number][] = [
  ['::', 128], ['::1', 128], ['100::', 64], ['2001:db8::', 32], ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8],
]

const SPECIAL = new BlockList()
for (const [a, p] of SPECIAL_V4) SPECIAL.addSubnet(a, p, 'ipv4')
for (const [a, p] of SPECIAL_V6) SPECIAL.addSubnet(a, p, 'ipv6')

/** Expands an IPv6 text to eight 16-bit groups (undefined when it is not IPv6). */
function groups6(a: string): number[] | undefined {
  if (isIP(a) !== 6) return undefined
  let s = a.toLowerCase()
  const pct = s.indexOf('%')
  if (pct >= 0) s = s.slice(0, pct)
  // A dotted IPv4 tail becomes two groups.
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(s)
  if (tail) {
    const o = tail[1]!.split('.').map(Number)
    s = s.slice(0, -tail[1]!.length) + `${((o[0]! << 8) | o[1]!).toString(16)}:${((o[2]! << 8) | o[3]!).toString(16)}`
  }
  const [head, rest] = s.split('::') as [string, string | undefined]
  const h = head ? head.split(':') : []
  const r = rest !== undefined ? (rest ? rest.split(':') : []) : []
  const fill = rest !== undefined ? 8 - h.length - r.length : 0
  const all = [...h, ...Array<string>(fill).fill('0'), ...r]
  return all.length === 8 ? all.map((x) => parseInt(x, 16)) : undefined
}

function v4(hi: number, lo: number): string {
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`
}

/**
 * The IPv4 address an IPv6 address carries, when it carries one that a host would route as IPv4:
 * mapped (::ffff:a.b.c.d), compatible (::a.b.c.d), NAT64 (64:ff9b::/96) and 6to4 (2002::/16).
 */
export function embeddedV4(address: string): string | undefined {
  const g = groups6(address)
  if (!g) return undefined
  const zeros = (n: number) => g.slice(0, n).every((x) => x === 0)
  if (zeros(5) && g[5] === 0xffff) return v4(g[6]!, g[7]!)
  if (zeros(6) && (g[6]! !== 0 || g[7]! > 1)) return v4(g[6]!, g[7]!)
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return v4(g[6]!, g[7]!)
  if (g[0] === 0x2002) return v4(g[1]!, g[2]!)
  return undefined
}

/** True when the address is in a special-purpose range (itself or through its embedded IPv4). */
export function isSpecialAddress(address: string): boolean {
  const fam = isIP(address)
  if (fam === 0) return true // not an address: refuse rather than guess
  if (fam === 4) return SPECIAL.check(address, 'ipv4')
  const inner = embeddedV4(address)
  if (inner !== undefined && SPECIAL.check(inner, 'ipv4')) return true
  return SPECIAL.check(address.split('%')[0]!, 'ipv6')
}

/** A BlockList of the CIDRs a rule names in `allow_private` (validated by the policy compiler). */
export function allowList(cidrs: readonly string[]): BlockList {
  const b = new BlockList()
  for (const c of cidrs) {
    const [a, p] = c.split('/') as [string, string]
    b.addSubnet(a, Number(p), isIPv4(a) ? 'ipv4' : 'ipv6')
  }
  return b
}

function inList(list: BlockList, address: string): boolean {
  if (isIPv4(address)) return list.check(address, 'ipv4')
  const inner = embeddedV4(address)
  if (inner !== undefined && list.check(inner, 'ipv4')) return true
  return list.check(address.split('%')[0]!, 'ipv6')
}

function sameAddress(a: string, b: string): boolean {
  const x = embeddedV4(a) ?? a
  const y = embeddedV4(b) ?? b
  if (x === y) return true
  const gx = groups6(x)
  const gy = groups6(y)
  return !!gx && !!gy && gx.every((v, i) => v === gy[i])
}

function isLoopback(a: string): boolean {
  const x = embeddedV4(a) ?? a
  return isIPv4(x) ? x.startsWith('127.') : sameAddress(x, '::1')
}

function isUnspecified(a: string): boolean {
  const x = embeddedV4(a) ?? a
  return x === '0.0.0.0' || sameAddress(x, '::')
}

export class AddressGuard {
  readonly #own: () => readonly Endpoint[]
  #local: { at: number; addresses: string[] } | undefined

  /** `own` lists serve's listeners; read at each check, so listeners that start later count. */
  readonly #lookup: (hostname: string) => Promise<LookupAddress[]>
  readonly #names = new Map<string, { at: number; addresses: string[] }>()

  /**
   * `own` lists serve's listeners; read at each check, so listeners that start later count.
   * `lookup` is the resolver (tests pass one that answers differently each time: rebinding).
   */
  constructor(own: () => readonly Endpoint[] = () => [], lookup?: (hostname: string) => Promise<LookupAddress[]>) {
    this.#own = own
    this.#lookup = lookup ?? ((h) => dnsLookupAll(h, { all: true }))
  }

  /** Addresses of this host's interfaces (cached for a few seconds: they rarely change). */
  #localAddresses(): string[] {
    const now = Date.now()
    if (!this.#local || now - this.#local.at > 5_000) {
      const addresses = Object.values(networkInterfaces()).flatMap((l) => (l ?? []).map((i) => i.address))
      this.#local = { at: now, addresses }
    }
    return this.#local.addresses
  }

  /**
   * Whether address:port is one of serve's listeners (a wildcard bind listens on every local
   * address). `resolved` adds the addresses of listeners named by host name (resolve()).
   */
  isOwn(address: string, port: number, resolved: readonly Endpoint[] = []): boolean {
    for (const l of [...this.#own(), ...resolved]) {
      if (l.port !== port) continue
      const host = l.host.replace(/^\[|\]$/g, '')
      if (isIP(host) === 0) {
        if (host.toLowerCase() === address.toLowerCase()) return true
        continue
      }
      if (sameAddress(host, address) || isUnspecified(address)) return true
      const local = isLoopback(address) || this.#localAddresses().some((x) => sameAddress(x, address))
      if (local && (isUnspecified(host) || isLoopback(host) || this.#localAddresses().some((x) => sameAddress(x, host)))) return true
    }
    return false
  }

  /** Throws DestinationRefused when a connection to address:port is not allowed. */
  check(address: string, port: number, allow: BlockList | undefined, resolved: readonly Endpoint[] = []): void {
    if (this.isOwn(address, port, resolved)) throw new DestinationRefused(address, port, true)
    if (isSpecialAddress(address) && !(allow && inList(allow, address))) throw new DestinationRefused(address, port, false)
  }

  /**
   * Resolves a host for a connection to `port` and returns the address to dial. Every address the
   * resolver returns is checked: one refused address refuses the name (a mixed answer is how a
   * rebinding attacker would alternate).
   */
  async resolve(hostname: string, port: number, allow: BlockList | undefined): Promise<string> {
    const named = await this.#namedListeners(port)
    if (isIP(hostname)) {
      this.check(hostname, port, allow, named)
      return hostname
    }
    if (this.isOwn(hostname, port)) throw new DestinationRefused(hostname, port, true)
    const addresses = await this.#lookup(hostname)
    if (addresses.length === 0) throw new DestinationRefused(hostname, port, false)
    for (const a of addresses) this.check(a.address, port, allow, named)
    return addresses[0]!.address
  }

  /**
   * Listeners on `port` named by host name (a `--db` host such as `db.internal`), as addresses:
   * another name for the same address must not reach them. Resolved at most every 30 s.
   */
  async #namedListeners(port: number): Promise<Endpoint[]> {
    const out: Endpoint[] = []
    for (const l of this.#own()) {
      if (l.port !== port || isIP(l.host.replace(/^\[|\]$/g, '')) !== 0) continue
      const now = Date.now()
      let hit = this.#names.get(l.host)
      if (!hit || now - hit.at > 30_000) {
        const addresses = await this.#lookup(l.host).then((a) => a.map((x) => x.address), () => [] as string[])
        hit = { at: now, addresses }
        if (this.#names.size > 64) this.#names.clear()
        this.#names.set(l.host, hit)
      }
      for (const address of hit.addresses) out.push({ host: address, port })
    }
    return out
  }
}

/**
 * The canonical form of a host as an authority names it: IPv4 in every form the WHATWG URL parser
 * (and getaddrinfo) accepts — decimal `2130706433`, octal `0177.0.0.1`, hex `0x7f.1`, short
 * `127.1` — becomes dotted quad; IPv6 is compressed and lowercase, without brackets; names are
 * lowercased (IDNA to punycode) without a trailing dot. Undefined when the parser refuses it.
 */
export function canonicalHost(raw: string): string | undefined {
  let h = raw.trim()
  if (h === '' || /[/?#@\s\\]/.test(h)) return undefined
  if (!h.startsWith('[') && h.includes(':')) h = `[${h}]`
  let hostname: string
  try {
    hostname = new URL(`http://${h}/`).hostname
  } catch {
    return undefined
  }
  hostname = hostname.replace(/^\[|\]$/g, '')
  return hostname.endsWith('.') ? hostname.slice(0, -1) : hostname
}
