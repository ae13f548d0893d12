// The Kubernetes driver against the fake API server, as the driver suites set it up: a temp dir
// holding the fake's kubelet root, a kubeconfig for it and a stand-in CA certificate; the
// `corral-proxy` Service in namespace corral; and drivers built with their own settings, closed
// (then the fake, then the dir) by close().
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { kubernetesSettingsFromEnv } from '../../src/runtime/index.js'
import { openKubeClient } from '../../src/runtime/kubernetes/index.js'
import { DEFAULT_LIMITS } from '../../src/runtime/limits.js'
import { kubernetesRuntime, type KubernetesRuntimeUnderTest } from '../runtime/drivers.js'
import { FakeKube } from './fake-kube/index.js'

export interface KubeRuntimes {
  fake: FakeKube
  dir: string
  /** A driver against the fake; `env` adds to (or overrides) CORRAL_AGENT_IMAGE and CORRAL_K8S_KUBECONFIG. */
  runtime(env?: Record<string, string>): KubernetesRuntimeUnderTest
  close(): Promise<void>
}

export interface KubeRuntimesOptions {
  /** The temp dir's name prefix. */
  prefix: string
  /** The proxy Service's cluster IP (what the pods' HTTPS_PROXY and egress rules name). */
  proxyClusterIP?: string
  /** Hand the drivers a CA certificate (a stand-in PEM) to put in each workspace's Secret. */
  ca?: boolean
}

export async function startKubeRuntimes({ prefix, proxyClusterIP = '127.0.0.1', ca = true }: KubeRuntimesOptions): Promise<KubeRuntimes> {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  const fake = await FakeKube.start({ root: join(dir, 'kubelet') })
  const kubeconfig = join(dir, 'kubeconfig')
  writeFileSync(kubeconfig, fake.kubeconfig())
  const caCertPath = ca ? join(dir, 'ca.pem') : undefined
  if (caCertPath) writeFileSync(caCertPath, '-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n')
  fake.store.create('services', 'corral', {
    apiVersion: 'v1', kind: 'Service', metadata: { name: 'corral-proxy' },
    spec: { clusterIP: proxyClusterIP, selector: { 'app.kubernetes.io/name': 'corral' }, ports: [{ name: 'proxy', port: 7071, targetPort: 7071 }] },
  })
  const runtimes: KubernetesRuntimeUnderTest[] = []
  return {
    fake,
    dir,
    runtime(env = {}) {
      const settings = kubernetesSettingsFromEnv({ CORRAL_AGENT_IMAGE: 'corral-agent:test', CORRAL_K8S_KUBECONFIG: kubeconfig, ...env }, DEFAULT_LIMITS)
      const r = kubernetesRuntime({ root: join(dir, `runtime-${runtimes.length}`), proxy: { host: '127.0.0.1', port: 1 }, caCertPath, settings, stopGraceMs: 1000, warn: () => {}, client: openKubeClient(settings) })
      runtimes.push(r)
      return r
    },
    async close() {
      for (const r of runtimes) await r.close()
      await fake.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
