// The driver's one door to the API server, over @kubernetes/client-node: in-cluster config or a
// kubeconfig, the typed Core and Networking clients, watches and exec. Failures keep the API
// server's status code (`statusCode`) so callers can tell 404, 409 and 410 apart.
import { CoreV1Api, Exec, KubeConfig, NetworkingV1Api, Watch } from '@kubernetes/client-node'
import type { KubernetesSettings } from './options.js'

export interface KubeClient {
  readonly config: KubeConfig
  readonly core: CoreV1Api
  readonly networking: NetworkingV1Api
  readonly watch: Watch
  readonly exec: Exec
}

export function openKubeClient(settings: Pick<KubernetesSettings, 'kubeconfig' | 'context'>): KubeClient {
  const config = new KubeConfig()
  if (settings.kubeconfig) config.loadFromFile(settings.kubeconfig)
  else if (process.env.KUBERNETES_SERVICE_HOST) config.loadFromCluster()
  else config.loadFromDefault()
  if (settings.context) config.setCurrentContext(settings.context)
  return {
    config,
    core: config.makeApiClient(CoreV1Api),
    networking: config.makeApiClient(NetworkingV1Api),
    watch: new Watch(config),
    exec: new Exec(config),
  }
}

/** The HTTP status of a failed API call (client-node's ApiException `code`), else undefined. */
export function statusCode(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown }
  if (typeof e?.code === 'number') return e.code
  if (typeof e?.statusCode === 'number') return e.statusCode
  return undefined
}

/** The API server's own message for a failure (its Status body), never a token or a body we sent. */
export function apiMessage(err: unknown): string {
  const body = (err as { body?: unknown }).body
  if (typeof body === 'string') {
    try {
      const parsed = JSON.parse(body) as { message?: string }
      if (parsed.message) return parsed.message
    } catch {
      // not JSON
    }
  }
  if (body && typeof body === 'object' && typeof (body as { message?: unknown }).message === 'string') return (body as { message: string }).message
  const code = statusCode(err)
  return `${code ? `HTTP ${code}: ` : ''}${(err as Error)?.message ?? String(err)}`.slice(0, 300)
}

/** Runs `fn`, treating the given status codes as "nothing to do" (undefined). */
export async function tolerate<T>(codes: readonly number[], fn: () => Promise<T>): Promise<T | undefined> {
  try {
    return await fn()
  } catch (err) {
    if (codes.includes(statusCode(err) ?? -1)) return undefined
    throw err
  }
}
