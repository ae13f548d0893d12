// Packs in pods (docs/kubernetes.md "Runtime: warm pools and packs"), against the fake API server
// and the real test registry: a pack's OCI image, pushed by digest to docker-registry, is an image
// volume of the agent pod mounted read-only at /packs/<name>; the fake kubelet pulls it by digest
// (manifest and layers, digests checked) and runs the agent as the pod's user, so the pack's own
// agent command runs from the pack like in a local sandbox, and the kernel refuses its writes there.
import { createHash } from 'node:crypto'
import { spawnSync } from 'node:child_process'
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Pod } from 'kubernetes-models/v1'
import { kubernetesSettingsFromEnv } from '../../../src/runtime/index.js'
import { agentPod, claimName, openKubeClient, podName } from '../../../src/runtime/kubernetes/index.js'
import { DEFAULT_LIMITS } from '../../../src/runtime/limits.js'
import { FakeKube } from '../../helpers/fake-kube/index.js'
import { registryAvailable, startRegistry, type TestRegistry } from '../../helpers/registry.js'
import { kubernetesRuntime, type KubernetesRuntimeUnderTest } from '../drivers.js'

const AGENT = `#!/bin/sh
{
  cat "$CORRAL_PACK_DIR/hello.txt"
  echo "$CORRAL_PACKS|$CORRAL_PACKS_DIR|$PACK_GREETING"
  if ( echo changed > "$CORRAL_PACK_DIR/hello.txt" ) 2>/dev/null; then echo writable; else echo readonly; fi
  if touch "$CORRAL_PACK_DIR/new" 2>/dev/null; then echo created; else echo refused; fi
  id -u
} > out.txt
`

const sha = (b: Buffer | string): string => `sha256:${createHash('sha256').update(b).digest('hex')}`

/** Pushes a one-layer OCI image of `files` and answers its reference by digest. */
async function pushPack(host: string, repository: string, files: Record<string, string>): Promise<string> {
  const src = mkdtempSync(join(tmpdir(), 'corral-pack-src-'))
  chmodSync(src, 0o755)
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(src, path, '..'), { recursive: true })
    writeFileSync(join(src, path), content, { mode: 0o755 })
  }
  const layer = spawnSync('tar', ['-c', '-f', '-', '-C', src, '--owner=0', '--group=0', '.'], { maxBuffer: 1 << 24 }).stdout
  rmSync(src, { recursive: true, force: true })
  const config = Buffer.from(JSON.stringify({ architecture: 'amd64', os: 'linux', rootfs: { type: 'layers', diff_ids: [sha(layer)] } }))
  for (const blob of [layer, config]) {
    const start = await fetch(`http://${host}/v2/${repository}/blobs/uploads/`, { method: 'POST' })
    const location = new URL(start.headers.get('location')!, `http://${host}`)
    location.searchParams.set('digest', sha(blob))
    const put = await fetch(location, { method: 'PUT', body: blob, headers: { 'content-type': 'application/octet-stream' } })
    expect(put.status).toBe(201)
  }
  const manifest = JSON.stringify({
    schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json',
    config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: sha(config), size: config.length },
    layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', digest: sha(layer), size: layer.length }],
  })
  const put = await fetch(`http://${host}/v2/${repository}/manifests/${sha(manifest)}`, { method: 'PUT', body: manifest, headers: { 'content-type': 'application/vnd.oci.image.manifest.v1+json' } })
  expect(put.status).toBe(201)
  return `${host}/${repository}@${sha(manifest)}`
}

const available = registryAvailable()

describe.skipIf(!available)('packs in pods', () => {
  let fake: FakeKube
  let registry: TestRegistry
  let dir: string
  let runtime: KubernetesRuntimeUnderTest
  const settings = () => kubernetesSettingsFromEnv({ CORRAL_AGENT_IMAGE: 'corral-agent:test', CORRAL_K8S_KUBECONFIG: join(dir, 'kubeconfig') }, DEFAULT_LIMITS)

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'corral-k8s-packs-'))
    // The agent runs as the pod's user (1000): it must reach the kubelet's directories.
    chmodSync(dir, 0o755)
    registry = await startRegistry()
    fake = await FakeKube.start({ root: join(dir, 'kubelet'), runAsPodUser: true })
    writeFileSync(join(dir, 'kubeconfig'), fake.kubeconfig())
    fake.store.create('services', 'corral', {
      apiVersion: 'v1', kind: 'Service', metadata: { name: 'corral-proxy' },
      spec: { clusterIP: '127.0.0.1', selector: { 'app.kubernetes.io/name': 'corral' }, ports: [{ name: 'proxy', port: 7071, targetPort: 7071 }] },
    })
    const s = settings()
    runtime = kubernetesRuntime({ root: join(dir, 'runtime'), proxy: { host: '127.0.0.1', port: 1 }, settings: s, stopGraceMs: 1000, warn: () => {}, client: openKubeClient(s) })
  })

  afterAll(async () => {
    await runtime?.close()
    await fake?.close()
    await registry?.stop()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  it("a pack's agent runs from its image, pulled by digest and mounted read-only at /packs/<name>", async () => {
    const imageRef = await pushPack(registry.host, 'corral/org_1/tools', { 'bin/agent': AGENT, 'hello.txt': 'hello from the pack\n' })
    const id = 'ws_packs1'
    await runtime.provision({ workspaceId: id, owner: { orgId: 'org_1', roleId: 'role_1' } })
    const proc = await runtime.startAgent(id, {
      command: ['sh', './bin/agent'], commandPack: 'tools', baseEnv: { PACK_GREETING: 'hi' },
      packs: [{ name: 'tools', dir: '/not/on/this/host', imageRef }], proxyToken: 'tok', files: { 'tasks.json': '[]' },
    })
    const exit = await Promise.race([proc.exited, new Promise<'late'>((r) => setTimeout(() => r('late'), 10_000).unref())])
    expect(exit).toEqual({ code: 0, signal: null })
    // As root the fake runs the agent as the pod's user (1000); otherwise as the test's own user,
    // for whom the pack's files, without write bits, are just as read-only.
    const uid = process.getuid?.() === 0 ? 1000 : process.getuid?.()
    expect(readFileSync(join(fake.kubelet.claimDir(claimName(id)), 'out.txt'), 'utf8')).toBe(`hello from the pack\ntools|/packs|hi\nreadonly\nrefused\n${uid}\n`)
    expect(fake.kubelet.pulled).toEqual([imageRef])
    const pod = fake.store.list('pods', 'corral', `corral.dev/workspace=${id},corral.dev/pod-kind=agent`)[0]!
    const spec = pod.spec as { volumes: { name: string; image?: { reference: string } }[]; containers: { name: string; volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[] }[] }
    expect(spec.volumes.find((v) => v.image)).toEqual({ name: 'pack-0', image: { reference: imageRef, pullPolicy: 'IfNotPresent' } })
    expect(spec.containers[0]!.volumeMounts).toContainEqual({ name: 'pack-0', mountPath: '/packs/tools', readOnly: true })
  })

  it('the agent pod with packs is a valid Pod; a pack without an image by digest is refused with its reason', async () => {
    const imageRef = `${registry.host}/corral/x@sha256:${'a'.repeat(64)}`
    const manifest = agentPod(settings(), podName('ws_x', 'abcde'), 'ws_x', {}, {
      command: ['sh'], proxyToken: 't', proxyUrl: 'http://10.0.0.1:7071', files: {}, env: {}, baseEnv: {}, stopGraceSeconds: 5,
      packs: [{ name: 'tools', imageRef }], packEnv: { CORRAL_PACKS: 'tools', CORRAL_PACKS_DIR: '/packs' },
    })
    expect(() => new Pod(manifest as never).validate()).not.toThrow()
    await runtime.provision({ workspaceId: 'ws_packs2' })
    const base = { command: ['sh', '-c', 'true'], proxyToken: 't' }
    await expect(runtime.startAgent('ws_packs2', { ...base, packs: [{ name: 'tools', dir: '/x' }] })).rejects.toThrow(/pack tools has no image in the registry.*CORRAL_PACK_REGISTRY/)
    await expect(runtime.startAgent('ws_packs2', { ...base, packs: [{ name: 'tools', dir: '/x', imageRef: `${registry.host}/corral/x:latest` }] })).rejects.toThrow(/not pinned by digest/)
  })
})
