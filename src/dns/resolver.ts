// One workspace's resolver: a DNS query in, a DNS answer out (dns-packet on the wire). It never
// asks anyone else: every name that can exist is answered with the workspace's synthetic address
// for it (synthetic.ts), allowed or not, so the agent's connection reaches the proxy and is
// decided there with the policy in force at that moment. The policy is consulted here only to
// say whether the lookup is an allowed one (the caller writes the spec's `dns` row for it).
import dnsPacket from 'dns-packet'
import type { DecodedPacket, Packet, Question } from 'dns-packet'
import { SyntheticTable } from './synthetic.js'

export interface ResolverLimits {
  /** Sustained queries per second per workspace; past the burst, queries are answered REFUSED. */
  queriesPerSecond: number
  burst: number
  /** Names one workspace may hold a synthetic address for; past it, new names get SERVFAIL. */
  maxNames: number
  /** TTL of answers (seconds): short, so a client asks again and each lookup is decided again. */
  ttlS: number
}

export const DEFAULT_RESOLVER_LIMITS: ResolverLimits = Object.freeze({ queriesPerSecond: 200, burst: 400, maxNames: 4096, ttlS: 30 })

/** What the workspace's policy says of a name at lookup time. */
export type LookupVerdict = { allowed: true; capability: string } | { allowed: false }

export interface LookupHooks {
  decide(name: string): LookupVerdict
  /** One allowed A lookup is being answered (the caller's `dns` row); awaited before the answer leaves, a throw answers SERVFAIL. */
  allowed(name: string, capability: string): Promise<void>
}

/** How a query was answered, for the caller's counters and the tests. */
export type Outcome = 'answered' | 'allowed' | 'nodata' | 'nxdomain' | 'refused' | 'rate_limited' | 'names_exhausted' | 'formerr' | 'notimp' | 'dropped' | 'row_refused'

const RCODE = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 } as const
const LABEL = /^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$/
/** Names that cannot exist on the internet (RFC 6761 and kin) and reverse lookups: NXDOMAIN, never an address. */
const NO_SUCH_SUFFIX = ['invalid', 'localhost', 'local', 'arpa', 'onion', 'test', 'example']
/** Query types that are never served: zone transfers and ANY (RFC 8482 lets a server refuse it). */
const REFUSED_TYPES = new Set(['AXFR', 'IXFR', 'ANY', 'MAILA', 'MAILB'])

/** A name as the policy sees it (lowercase, no trailing dot), or undefined when it cannot exist. */
export function lookupName(raw: string): string | undefined {
  const name = raw.toLowerCase().replace(/\.$/, '')
  if (name.length === 0 || name.length > 253) return undefined
  const labels = name.split('.')
  // A single label is a search-list leftover or a local host name: nothing the proxy could reach.
  if (labels.length < 2 || !labels.every((l) => LABEL.test(l))) return undefined
  if (NO_SUCH_SUFFIX.includes(labels[labels.length - 1]!)) return undefined
  // An all-numeric last label would read as an address to most clients.
  if (/^\d+$/.test(labels[labels.length - 1]!)) return undefined
  return name
}

export class WorkspaceResolver {
  readonly table: SyntheticTable
  readonly #limits: ResolverLimits
  #tokens: number
  #refilledAt = Date.now()

  constructor(limits: ResolverLimits = DEFAULT_RESOLVER_LIMITS) {
    this.#limits = limits
    this.#tokens = limits.burst
    this.table = new SyntheticTable(limits.maxNames)
  }

  /** Answers one query; undefined (no answer at all) for bytes that are not a DNS query. */
  async answer(query: Buffer, hooks: LookupHooks): Promise<{ reply: Buffer | undefined; outcome: Outcome; name?: string }> {
    let packet: DecodedPacket
    try {
      packet = dnsPacket.decode(query)
    } catch {
      // A readable header gets FORMERR with its id; anything shorter is not a query at all.
      if (query.length < 12) return { reply: undefined, outcome: 'dropped' }
      return { reply: reply({ id: query.readUInt16BE(0), flags: 0 }, [], RCODE.FORMERR), outcome: 'formerr' }
    }
    if (packet.type === 'response') return { reply: undefined, outcome: 'dropped' }
    if (!this.#take()) return { reply: reply(packet, packet.questions ?? [], RCODE.REFUSED), outcome: 'rate_limited' }
    const opcode = (packet as { opcode?: string }).opcode
    if (opcode !== undefined && opcode !== 'QUERY') return { reply: reply(packet, packet.questions ?? [], RCODE.NOTIMP), outcome: 'notimp' }
    const questions = packet.questions ?? []
    if (questions.length !== 1) return { reply: reply(packet, questions, RCODE.FORMERR), outcome: 'formerr' }
    const q = questions[0]!
    if ((q.class ?? 'IN') !== 'IN' || REFUSED_TYPES.has(q.type)) return { reply: reply(packet, questions, RCODE.REFUSED), outcome: 'refused' }
    const name = lookupName(q.name)
    if (name === undefined) return { reply: reply(packet, questions, RCODE.NXDOMAIN, [], [this.#soa(q.name)]), outcome: 'nxdomain' }
    const address = this.table.addressOf(name)
    if (address === undefined) return { reply: reply(packet, questions, RCODE.SERVFAIL), outcome: 'names_exhausted', name }
    // Only A records exist: AAAA (and every other type) is an empty answer with a negative TTL, so a
    // happy-eyeballs client goes straight to the IPv4 address instead of waiting on IPv6.
    if (q.type !== 'A') return { reply: reply(packet, questions, RCODE.NOERROR, [], [this.#soa(name)]), outcome: 'nodata', name }
    const verdict = hooks.decide(name)
    if (verdict.allowed) {
      // No answer without its row: a row the audit log refused turns the answer into SERVFAIL.
      try {
        await hooks.allowed(name, verdict.capability)
      } catch {
        return { reply: reply(packet, questions, RCODE.SERVFAIL), outcome: 'row_refused', name }
      }
    }
    const answers: Packet['answers'] = [{ type: 'A', name: q.name, class: 'IN', ttl: this.#limits.ttlS, data: address }]
    return { reply: reply(packet, questions, RCODE.NOERROR, answers), outcome: verdict.allowed ? 'allowed' : 'answered', name }
  }

  #take(): boolean {
    const now = Date.now()
    this.#tokens = Math.min(this.#limits.burst, this.#tokens + ((now - this.#refilledAt) / 1000) * this.#limits.queriesPerSecond)
    this.#refilledAt = now
    if (this.#tokens < 1) return false
    this.#tokens -= 1
    return true
  }

  #soa(name: string): NonNullable<Packet['authorities']>[number] {
    const ttl = this.#limits.ttlS
    return {
      type: 'SOA', name: name.replace(/\.$/, '') || '.', class: 'IN', ttl,
      data: { mname: 'resolver.corral.internal', rname: 'hostmaster.corral.internal', serial: 1, refresh: ttl, retry: ttl, expire: ttl, minimum: ttl },
    }
  }
}

function reply(query: Pick<Packet, 'id' | 'flags'>, questions: Question[], rcode: number, answers: Packet['answers'] = [], authorities: Packet['authorities'] = []): Buffer {
  // Recursion desired is echoed; recursion available is set: the client may not look elsewhere.
  const rd = (query.flags ?? 0) & dnsPacket.RECURSION_DESIRED
  return dnsPacket.encode({
    type: 'response', id: query.id ?? 0, flags: rd | dnsPacket.RECURSION_AVAILABLE | dnsPacket.AUTHORITATIVE_ANSWER | rcode,
    questions, answers, authorities,
  })
}
