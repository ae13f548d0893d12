// Where workspace pods send their traffic: the Service in front of corral's proxy. Its cluster IP
// goes into HTTPS_PROXY (so a pod needs no DNS), its selector and target port into the egress rule
// of the NetworkPolicy (a policy sees pod addresses after the Service's translation).
import { RuntimeError } from '../errors.js'
import { apiMessage, statusCode, type KubeClient } from './kube-client.js'
import type { KubernetesSettings } from './options.js'

export interface ResolvedProxy {
  /** `http://<cluster IP>:<port>`. */
  url: string
  selector: Record<string, string>
  targetPort: number
  warnings: string[]
}

export class ProxyService {
  readonly #client: KubeClient
  readonly #s: KubernetesSettings
  #resolved: Promise<ResolvedProxy> | undefined

  readonly #ownPort: number

  /** `ownPort`: the port serve's proxy listens on (the target port when the Service cannot be read). */
  constructor(client: KubeClient, settings: KubernetesSettings, ownPort: number) {
    this.#client = client
    this.#s = settings
    this.#ownPort = ownPort
  }

  resolve(): Promise<ResolvedProxy> {
    this.#resolved ??= this.#read().catch((err: unknown) => {
      this.#resolved = undefined
      throw err
    })
    return this.#resolved
  }

  async #read(): Promise<ResolvedProxy> {
    const { name, port: wanted } = this.#s.proxyService
    let svc
    try {
      svc = await this.#client.core.readNamespacedService({ name, namespace: this.#s.namespace })
    } catch (err) {
      if (statusCode(err) === 403) return this.#fallback()
      const why = statusCode(err) === 404 ? 'does not exist' : `cannot be read (${apiMessage(err)})`
      throw new RuntimeError('runtime_unavailable', `the proxy Service ${name} in namespace ${this.#s.namespace} ${why}; set CORRAL_K8S_PROXY_SERVICE (docs/kubernetes.md "Runtime: network")`)
    }
    const ip = svc.spec?.clusterIP
    if (!ip || ip === 'None') throw new RuntimeError('runtime_unavailable', `the proxy Service ${name} has no cluster IP (a headless Service cannot be the proxy's)`)
    const ports = svc.spec?.ports ?? []
    const port = wanted === undefined ? ports[0] : ports.find((p) => p.port === wanted)
    if (!port) throw new RuntimeError('runtime_unavailable', `the proxy Service ${name} has no port${wanted ? ` ${wanted}` : ''}`)
    const selector = svc.spec?.selector ?? {}
    if (Object.keys(selector).length === 0) {
      throw new RuntimeError('runtime_unavailable', `the proxy Service ${name} selects no pods: the workspace NetworkPolicy allows egress to the pods behind it, so it needs a selector`)
    }
    // A named target port (deploy/'s `proxy`) is the container port serve's proxy listens on: its own.
    const target = port.targetPort ?? port.port
    const targetPort = typeof target === 'number' ? target : /^\d+$/.test(target) ? Number(target) : this.#ownPort
    return { url: urlOf(ip, port.port), selector, targetPort, warnings: [] }
  }

  /** No right to read Services: the service-link variables, the configured selector, serve's own proxy port. */
  #fallback(): ResolvedProxy {
    const { host, port, selector } = this.#s.proxyFallback
    const name = this.#s.proxyService.name
    const linkName = name.toUpperCase().replaceAll('-', '_')
    if (!host || !(this.#s.proxyService.port ?? port)) {
      throw new RuntimeError('runtime_unavailable', `the proxy Service ${name} cannot be read (403 Forbidden: grant "get services" to corral's Role) and ${linkName}_SERVICE_HOST/_PORT are not set`)
    }
    return { url: urlOf(host, this.#s.proxyService.port ?? port!), selector, targetPort: this.#ownPort, warnings: [] }
  }
}

function urlOf(ip: string, port: number): string {
  return `http://${ip.includes(':') ? `[${ip}]` : ip}:${port}`
}
