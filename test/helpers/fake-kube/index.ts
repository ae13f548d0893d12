export { FakeKube, type FakeKubeOptions, type SeenRequest } from './server.js'
export { status, matchesSelector, type KubeObject } from './store.js'
