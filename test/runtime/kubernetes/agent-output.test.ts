// The agent's output on Kubernetes (src/runtime/kubernetes/pod-logs.ts, docs/kubernetes.md
// "Runtime: agent output"): the agent container's log followed through the fake API server's
// `GET …/pods/{name}/log?follow=true&timestamps=true` (test/helpers/fake-kube/logs.ts), whose
// kubelet streams what a real process writes. A stream cut mid-line is resumed with `sinceTime`
// and no line is delivered twice or lost (lines sharing a stamp included), a slow stream split
// mid-line is put back together, following stops when the pod goes (and, without the right to
// read pods/log, after one warning), an adopted agent is followed from its adoption, and through the shipper
// (src/workspaces/log-shipper.ts) a capability token the agent prints never reaches the store.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { kubernetesSettingsFromEnv, type AgentProcess } from '../../../src/runtime/index.js'
import { claimName, openKubeClient } from '../../../src/runtime/kubernetes/index.js'
import { DEFAULT_LIMITS } from '../../../src/runtime/limits.js'
import type { WorkspaceLogs } from '../../../src/store/index.js'
import { shipAgentLog } from '../../../src/workspaces/log-shipper.js'
import { FakeKube } from '../../helpers/fake-kube/index.js'
import { kubernetesRuntime, type KubernetesRuntimeUnderTest } from '../drivers.js'

let fake: FakeKube
let dir: string
let r: KubernetesRuntimeUnderTest
let seq = 0
const warnings: string[] = []

const wsId = (): string => `ws_${Date.now().toString(16)}${(seq++).toString(16).padStart(4, '0')}`
const launch = (script: string, proxyToken = 'token-abc') => ({ command: ['sh', '-c', script], proxyToken, files: {}, env: {} })
const lines = (n: number, from = 1): string => Array.from({ length: n }, (_, i) => `line ${i + from}\n`).join('')

/** Everything proc.output() yields, joined (bounded: the agent's own script ends it). */
async function collect(proc: AgentProcess): Promise<string> {
  let text = ''
  for await (const t of proc.output!()) text += t
  return text
}

async function started(script: string, token?: string): Promise<{ id: string; proc: AgentProcess }> {
  const id = wsId()
  await r.provision({ workspaceId: id })
  return { id, proc: await r.startAgent(id, launch(script, token)) }
}

const logRequests = (pod: string) => fake.requests.filter((q) => q.path.endsWith(`/pods/${pod}/log`))
const agentPodOf = (id: string) => fake.store.list('pods', 'corral', `corral.dev/workspace=${id},corral.dev/pod-kind=agent`)[0]!.metadata.name

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'corral-k8s-logs-'))
  fake = await FakeKube.start({ root: join(dir, 'kubelet') })
  const kubeconfig = join(dir, 'kubeconfig')
  writeFileSync(kubeconfig, fake.kubeconfig())
  fake.store.create('services', 'corral', {
    apiVersion: 'v1', kind: 'Service', metadata: { name: 'corral-proxy' },
    spec: { clusterIP: '127.0.0.1', selector: { 'app.kubernetes.io/name': 'corral' }, ports: [{ name: 'proxy', port: 7071, targetPort: 7071 }] },
  })
  const settings = kubernetesSettingsFromEnv({ CORRAL_AGENT_IMAGE: 'corral-agent:test', CORRAL_K8S_KUBECONFIG: kubeconfig }, DEFAULT_LIMITS)
  r = kubernetesRuntime({ root: join(dir, 'runtime'), proxy: { host: '127.0.0.1', port: 1 }, settings, stopGraceMs: 1000, warn: (line) => void warnings.push(line), client: openKubeClient(settings) })
})

afterEach(() => {
  fake.logHostility.cut = undefined
  fake.logHostility.slowMs = 0
  fake.forbidden.delete('pods/log')
})

afterAll(async () => {
  await r?.close()
  await fake?.close()
  rmSync(dir, { recursive: true, force: true })
})

describe('agent output on kubernetes', () => {
  it('streams what the agent process writes to stdout and stderr, in order, and ends with the agent', async () => {
    const { proc } = await started('echo one; echo two >&2; sleep 0.2; printf "three\\nno newline"')
    expect(await collect(proc)).toBe('one\ntwo\nthree\nno newline\n')
    expect(await proc.exited).toEqual({ code: 0, signal: null })
  })

  it('an agent that leaves a process behind still ends, and its log with it (the container goes with its main process)', async () => {
    const { proc } = await started('sleep 30 & echo left; exit 0')
    expect(await collect(proc)).toBe('left\n')
    expect(await proc.exited).toEqual({ code: 0, signal: null })
  })

  it('a stream cut mid-line is resumed with sinceTime: every line once, in order (lines sharing a stamp too)', async () => {
    // Two streams cut: the first after 3 lines, the next after 3 more; 40 lines written at once
    // share millisecond stamps, so resuming at a stamp must skip exactly the lines already seen.
    fake.logHostility.cut = { streams: 2, afterLines: 3 }
    const { id, proc } = await started(`for i in $(seq 1 40); do echo "line $i"; done; sleep 0.3; echo "line 41"`)
    expect(await collect(proc)).toBe(lines(41))
    const asked = logRequests(agentPodOf(id)).map((q) => new URLSearchParams(q.query))
    expect(asked.length).toBeGreaterThanOrEqual(3)
    expect(asked[0]!.get('follow')).toBe('true')
    expect(asked[0]!.get('timestamps')).toBe('true')
    expect(asked[0]!.get('container')).toBe('agent')
    expect(asked[0]!.has('sinceTime')).toBe(false)
    expect(asked[1]!.get('sinceTime')).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$/)
  })

  it('a slow stream, each line arriving in two pieces, is put back together', async () => {
    fake.logHostility.slowMs = 20
    const { proc } = await started(`for i in $(seq 1 5); do echo "line $i"; done`)
    expect(await collect(proc)).toBe(lines(5))
  })

  it('stops following when the pod goes', async () => {
    const { id, proc } = await started('echo up; exec sleep 60')
    const pod = agentPodOf(id)
    const seen: string[] = []
    const following = (async () => {
      for await (const t of proc.output!()) {
        seen.push(t)
        if (t.includes('up')) fake.kubelet.delete('corral', pod, 0)
      }
    })()
    await following
    expect(seen.join('')).toBe('up\n')
    expect(await proc.exited).toEqual({ code: null, signal: 'SIGKILL' })
    expect(fake.openLogStreams).toBe(0)
  })

  it('without the right to read pods/log: one warning naming the grant, and following ends', async () => {
    fake.forbidden.add('pods/log')
    warnings.length = 0
    const { id, proc } = await started('echo hidden; exec sleep 60')
    expect(await collect(proc)).toBe('')
    expect(warnings).toEqual([expect.stringMatching(/cannot read the log of pod .*403.*grant corral's Role "get" on pods\/log/)])
    await r.stopAgent(id)
  })

  it('an adopted agent (a takeover) is followed from the adoption on: what it wrote before is not delivered again', async () => {
    // The agent writes a line, then waits (bounded) for a file the test creates after the adoption.
    const { id } = await started('echo before; for i in $(seq 1 400); do [ -e go ] && break; sleep 0.05; done; echo after')
    const settings = kubernetesSettingsFromEnv({ CORRAL_AGENT_IMAGE: 'corral-agent:test', CORRAL_K8S_KUBECONFIG: join(dir, 'kubeconfig') }, DEFAULT_LIMITS)
    const second = kubernetesRuntime({ root: join(dir, 'runtime-2'), proxy: { host: '127.0.0.1', port: 1 }, settings, stopGraceMs: 1000, warn: () => {}, client: openKubeClient(settings) })
    try {
      const [adopted] = await second.driver.adopt([id])
      const following = collect(adopted!.process)
      writeFileSync(join(fake.kubelet.claimDir(claimName(id)), 'go'), '')
      expect(await following).toBe('after\n')
    } finally {
      await second.close()
    }
  })

  it('through the shipper: stored once each, the capability token redacted, across a cut stream', async () => {
    const token = `eyJ${'a'.repeat(30)}.eyJ${'b'.repeat(30)}.${'c'.repeat(40)}`
    fake.logHostility.cut = { streams: 1, afterLines: 2 }
    const { id, proc } = await started('echo start; echo "proxy=$HTTPS_PROXY"; echo "again $HTTPS_PROXY"; echo end', token)
    const chunks: string[] = []
    const logs: WorkspaceLogs = { append: async (ws, text) => (ws === id ? chunks.push(text) : 0), read: async () => ({ chunks: [], truncated: false }) }
    await shipAgentLog({ logs, intervalMs: 10 }, proc, 0, token)
    // The agent prints its proxy URL, which carries its token (HTTPS_PROXY from the pod's Secret).
    expect(chunks.join('')).toBe('start\nproxy=http://corral:[redacted]@127.0.0.1:7071\nagain http://corral:[redacted]@127.0.0.1:7071\nend\n')
  })
})
