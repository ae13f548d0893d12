// The org-material Sealer shared by the /v1 secrets and credentials routes and the proxy in one
// process, keyed by the store object (so a test app and a serve each get their own).
import type { Store } from '../store/index.js'
import type { Sealer } from './sealed.js'

const sealers = new WeakMap<object, Sealer>()

export function registerSealer(store: Store, sealer: Sealer): void {
  sealers.set(store, sealer)
}

export function sealerFor(store: Store): Sealer | undefined {
  return sealers.get(store)
}
