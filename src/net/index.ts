// Which addresses a connection that serve makes may reach (docs/security.md "Destinations"): the
// address guard the proxy dials its upstreams through, the OAuth client reaches providers
// through and the pack registry client follows a registry's redirects and token realm through.
// A leaf: it imports no other part.
export {
  AddressGuard, DestinationRefused, allowList, canonicalHost, destinationRefusal, embeddedV4, isSpecialAddress, type Endpoint,
} from './address-guard.js'
export { cidrList } from './cidr-list.js'
export { guardedConnector } from './guarded-connect.js'
