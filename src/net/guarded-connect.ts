// The connect function of an undici Agent whose every connection the address guard checks: the
// name is resolved here, every address checked (address-guard.ts), and the socket dials the
// checked address; `host` (the origin) still sets SNI and the verified certificate identity. The
// proxy's upstreams (src/proxy/upstream.ts, with their shared SecureContext), the OAuth client's
// provider calls and the pack registry client dial through it.
import type { BlockList } from 'node:net'
import { buildConnector } from 'undici'
import type { AddressGuard } from './address-guard.js'

/** An undici `connect` option: connections refused by `guard` (special ranges outside `allow`, serve's listeners) fail with DestinationRefused. */
export function guardedConnector(guard: AddressGuard, allow: BlockList | undefined, tls: buildConnector.BuildOptions = {}): buildConnector.connector {
  const base = buildConnector({ ...tls, rejectUnauthorized: true } as buildConnector.BuildOptions)
  return (options, callback) => {
    const hostname = options.hostname.replace(/^\[|\]$/g, '')
    const port = Number(options.port) || (options.protocol === 'https:' ? 443 : 80)
    guard.resolve(hostname, port, allow).then(
      (address) => base({ ...options, hostname: address, servername: undefined } as buildConnector.Options, callback),
      (err: Error) => callback(err, null),
    )
  }
}
