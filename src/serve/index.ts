// The composition root's face: `corral serve` (startServe) and `corral proxy` (startProxy alone).
export { sandboxUidFromEnv, serveConfig, taskRateFromEnv, type ServeConfig, type ServeOptions } from './config.js'
export { databaseEndpoint, endpointOf, readCaFiles, startProxy, type ProxyParts, type RunningProxy } from './proxy.js'
export { startServe, type RunningServe } from './serve.js'
export { DataDirLocked } from './data-dir-lock.js'
export { runtimeOptions } from './workspaces.js'
export { startProxyAlone, type ProxyAloneOptions, type RunningProxyAlone } from './proxy-alone.js'
export { announceProxyWorker, defaultProxyWorkers, isProxyWorker, releaseProxyWorker, startProxyWorkers } from './proxy-workers.js'
