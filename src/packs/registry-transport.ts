// Which addresses the registry client's connections may reach (docs/security.md "What serve
// fetches itself obeys the same guard"; docs/packs.md "Registry"). A registry's answers name further
// URLs serve then fetches — blob redirects, the Bearer token realm, an upload's Location — and a
// pack's image reference under `CORRAL_REGISTRY_ALLOW=*` names the registry itself: none of them is
// the operator's choice. So every connection goes through src/net/'s AddressGuard where the socket
// is made (every resolved address, each hop, each new connection: DNS rebinding gets nothing), as
// the proxy's upstreams and the OAuth client do. The registries the operator named
// (`CORRAL_PACK_REGISTRY`, the hosts listed in `CORRAL_REGISTRY_ALLOW`) may be at any address —
// tests and on-premises registries are on loopback and private networks — except serve's own
// listeners, which no connection reaches. Anywhere else, loopback, private, link-local and other
// special ranges are refused unless the operator opens a range with CORRAL_REGISTRY_ALLOW_PRIVATE;
// `*` is not a name, so a registry a member names under it is held to the same ranges.
import { Agent, type Dispatcher } from 'undici'
import { AddressGuard, allowList, cidrList, destinationRefusal, guardedConnector, type Endpoint } from '../net/index.js'

/** The variable an operator names private ranges registries may redirect to in (`10.1.0.0/16`). */
export const REGISTRY_ALLOW_PRIVATE_ENV = 'CORRAL_REGISTRY_ALLOW_PRIVATE'

/** The operator's opt-in ranges from the environment; a bad entry throws, naming the variable. */
export function registryAllowPrivate(env: Record<string, string | undefined>): string[] {
  return cidrList(env[REGISTRY_ALLOW_PRIVATE_ENV], REGISTRY_ALLOW_PRIVATE_ENV)
}

export interface RegistryTransportOptions {
  /** Registries (`host[:port]`) the operator named: reachable at any address but serve's listeners. */
  trusted?: Iterable<string>
  /**
   * Whether the registry a reference names counts as named by the operator (default true: a library
   * caller that checked the reference itself). serve's settings set it false: there a user names it.
   */
  trustNamed?: boolean
  /** CIDRs of special ranges every other destination may be in (CORRAL_REGISTRY_ALLOW_PRIVATE). */
  allowPrivate?: readonly string[]
}

/** The two connection pools of a registry client: to registries the operator named, and to anywhere else. */
export class RegistryTransport {
  #own: () => readonly Endpoint[] = () => []
  readonly #trusted: Set<string>
  readonly #trustNamed: boolean
  readonly #named: Agent
  readonly #elsewhere: Agent

  constructor(o: RegistryTransportOptions = {}) {
    this.#trusted = new Set([...(o.trusted ?? [])].map(hostKey))
    this.#trustNamed = o.trustNamed ?? true
    const guard = new AddressGuard(() => this.#own())
    this.#named = new Agent({ connect: guardedConnector(guard, allowList(['0.0.0.0/0', '::/0'])) })
    this.#elsewhere = new Agent({ connect: guardedConnector(guard, o.allowPrivate?.length ? allowList(o.allowPrivate) : undefined) })
  }

  /** serve's listeners (read at each connect): refused to every connection, named registries' too. */
  refuseListeners(own: () => readonly Endpoint[]): void {
    this.#own = own
  }

  /** The pool for a request to `url` made for an image of `registry` (`host[:port]`). */
  dispatcherFor(url: URL, registry: string): Dispatcher {
    const target = hostKey(url.host)
    const named = this.#trusted.has(target) || (this.#trustNamed && target === hostKey(registry))
    return named ? this.#named : this.#elsewhere
  }

  async close(): Promise<void> {
    await Promise.all([this.#named.close(), this.#elsewhere.close()])
  }
}

/** `host[:port]` lower-cased, without the default ports (a URL's `host` omits them). */
function hostKey(host: string): string {
  return host.toLowerCase().replace(/:(443|80)$/, '')
}

/** The guard's refusal in a failed request's error, as one line naming the opt-in; undefined otherwise. */
export function refusalMessage(err: unknown, host: string): string | undefined {
  const refused = destinationRefusal(err)
  if (!refused) return undefined
  if (refused.own) return `${host}: refused: ${refused.address}:${refused.port} is a listener of corral serve`
  return `${host}: refused: ${refused.address} is a loopback, private, link-local or other special-purpose address and not a registry the operator named (CORRAL_PACK_REGISTRY, CORRAL_REGISTRY_ALLOW); an operator can allow such a range with ${REGISTRY_ALLOW_PRIVATE_ENV}`
}
