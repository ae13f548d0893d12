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

  constructor(client: KubeClient, settings: KubernetesSettings) {
    this.#client = client
    this.#s = settings
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
    const target = port.targetPort
    const targetPort = typeof target === 'number' ? target : Number(target ?? port.port)
    const warnings = Number.isInteger(targetPort)
      ? []
      : [`kubernetes: the proxy Service ${name} names its target port (${String(target)}); the NetworkPolicy allows its port number ${port.port} instead`]
    const host = ip.includes(':') ? `[${ip}]` : ip
    return { url: `http://${host}:${port.port}`, selector, targetPort: Number.isInteger(targetPort) ? targetPort : port.port, warnings }
  }
}
