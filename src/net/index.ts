// Which addresses a connection that serve makes may reach (docs/security.md "Destinations"): the
// address guard the proxy dials its upstreams through and the OAuth client reaches providers
// through. A leaf: it imports no other part.
export {
  AddressGuard, DestinationRefused, allowList, canonicalHost, destinationRefusal, embeddedV4, isSpecialAddress, type Endpoint,
} from './address-guard.js'
export { cidrList } from './cidr-list.js'
