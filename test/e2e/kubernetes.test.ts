// `corral serve --runtime kubernetes` against the fake API server (test/helpers/fake-kube/), whose
// kubelet runs each workspace pod's agent container as a local process: a task with an upload runs
// the reference agent through the real proxy (token and CA from the pod's Secret, HTTPS_PROXY the
// proxy Service's cluster IP), /data is snapshotted over exec + tar and listed, a fork restores it
// into a new claim and takes a follow-up, a pod evicted mid-task fails that task and the workspace
// goes on, a stop leaves no pod; a pooled role's warm pod is claimed by a task and replaced; the agent's output is shipped
// (`corral workspace logs`). docs/kubernetes.md "Runtime: what was proven where".
import { existsSync, writeFileSync } from 'node:fs'
import { connect, createServer, type AddressInfo, type Socket } from 'node:net'
import { dirname, join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { modelPolicy, workingDirectory } from '../../src/dev/index.js'
import { FakeKube } from '../helpers/fake-kube/index.js'
import { startStack, type Stack } from '../helpers/serve.js'

// The model-only policy, as corral dev's demo builds it (src/dev/seed.ts).
const CAPS = modelPolicy({ domain: '127.0.0.1' })

/** Tools first, `finish` once results came back; a task saying "linger" sleeps first (to be evicted). */
function script(body: any) {
  const last = body.messages.at(-1)
  // A resumed session's new task message also carries the previous turn's tool results.
  const text = JSON.stringify(last)
  const sawResults = Array.isArray(last?.content) && last.content.some((c: any) => c.type === 'tool_result')
  if (text.includes('follow up')) return { tools: [{ name: 'run_command', input: { command: 'cat report.md > seen-by-fork.txt' } }], usage: { input: 10, output: 5 } }
  if (text.includes('linger')) return { tools: [{ name: 'run_command', input: { command: 'echo lingering > linger.txt; sleep 30' } }], usage: { input: 10, output: 5 } }
  if (sawResults) return { text: 'Done.', tools: [{ name: 'finish', input: { summary: 'all done' } }], usage: { input: 10, output: 5 } }
  return {
    tools: [
      { name: 'write_file', input: { path: 'report.md', content: '# Report\n' } },
      { name: 'run_command', input: { command: 'cp uploads/*/notes.txt notes-copy.txt' } },
    ],
    usage: { input: 10, output: 5 },
  }
}

/** Claude Code's side (the `claude` role): write a file with Write, run a command with Bash, answer. */
function claudeScript(body: any) {
  const messages: any[] = body.messages
  const taskAt = messages.findLastIndex((m) => m.role === 'user' && !(Array.isArray(m.content) && m.content.some((b: any) => b.type === 'tool_result')))
  const step = messages.slice(taskAt).filter((m) => m.role === 'assistant').length
  const usage = { input: 30, output: 20 }
  // The working directory Claude Code states in its prompt: /data in a real pod, the claim's host
  // directory under the fake kubelet (which maps paths of argv and environment, not of syscalls).
  const cwd = workingDirectory(body) ?? '/data'
  if (step === 0) return { tools: [{ name: 'Write', input: { file_path: `${cwd}/from-claude.txt`, content: 'written in a pod\n' } }], stop: 'tool_use' as const, usage }
  if (step === 1) return { tools: [{ name: 'Bash', input: { command: 'wc -c from-claude.txt > counted.txt', description: 'count' } }], stop: 'tool_use' as const, usage }
  return { text: 'Claude Code ran in a pod.', usage }
}

/**
 * kube-proxy's part for the `corral-proxy` Service: its port forwards to serve's proxy. The test
 * holds the Service's port from before serve starts (serve reads the Service at start) and serve's
 * proxy takes a port of its own: a port picked free, released and bound again by serve later could
 * be taken in between by any of the suites running beside this one (it was: setup failed).
 */
async function serviceForwarder(): Promise<{ port: number; to(port: number): void; close(): Promise<void> }> {
  let target = 0
  const open = new Set<Socket>()
  const srv = createServer((inbound) => {
    const outbound = connect(target, '127.0.0.1')
    for (const s of [inbound, outbound]) {
      open.add(s)
      s.on('close', () => open.delete(s))
      s.on('error', () => {
        inbound.destroy()
        outbound.destroy()
      })
    }
    inbound.pipe(outbound)
    outbound.pipe(inbound)
  })
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r))
  return {
    port: (srv.address() as AddressInfo).port,
    to: (port) => (target = port),
    close: () => {
      for (const s of open) s.destroy()
      return new Promise<void>((r) => srv.close(() => r()))
    },
  }
}

describe('serve --runtime kubernetes against the fake API server', () => {
  let stack: Stack
  let fake: FakeKube
  let service: Awaited<ReturnType<typeof serviceForwarder>> | undefined
  const idleAfter = (id: string, count: number) => stack.until(async () => {
    const w = (await stack.api('GET', `/workspaces/${id}`)).body
    return w.state === 'idle' && w.task_count === count && w
  }, `workspace ${id} idle after ${count} tasks`)
  const podsOf = (id: string) => fake.store.list('pods', 'corral', `corral.dev/workspace=${id}`)

  beforeAll(async () => {
    fake = await FakeKube.start()
    service = await serviceForwarder()
    // A named target port (as deploy/'s): the container port serve's proxy listens on.
    fake.store.create('services', 'corral', {
      apiVersion: 'v1', kind: 'Service', metadata: { name: 'corral-proxy' },
      spec: { clusterIP: '127.0.0.1', selector: { 'app.kubernetes.io/name': 'corral' }, ports: [{ name: 'proxy', port: service.port, targetPort: 'proxy' }] },
    })
    const kubeconfig = join(fake.kubelet.root, 'kubeconfig')
    writeFileSync(kubeconfig, fake.kubeconfig())
    stack = await startStack({
      model: script, role: { name: 'coder', capabilities: CAPS },
      args: ['--runtime', 'kubernetes'],
      env: {
        CORRAL_K8S_KUBECONFIG: kubeconfig, CORRAL_AGENT_IMAGE: 'corral-agent:test',
        // The fake kubelet runs the container's command on this host: the built reference agent.
        CORRAL_AGENT_COMMAND: JSON.stringify([process.execPath, resolve('dist/agent/main.js')]),
      },
    })
    service.to(Number(new URL(stack.proxyUrl).port))
  })
  afterAll(async () => {
    await stack?.close()
    await service?.close()
    await fake?.close()
  })

  it('provisions a pod, runs a task through the proxy, snapshots, forks, survives an eviction and stops', async () => {
    writeFileSync(join(stack.dir, 'notes.txt'), 'remember the milk\n')
    const submitted = await stack.corral(['task', 'submit', '--role', 'coder', 'Write a report', '--file', join(stack.dir, 'notes.txt'), '--json'])
    expect(submitted.code, submitted.stderr).toBe(0)
    const accepted = JSON.parse(submitted.stdout)
    const wsId: string = accepted.workspace_id
    const done = await stack.taskDone(accepted.task_id)
    expect(done, `${JSON.stringify(done)}\n${stack.serve.output().slice(-3000)}`).toMatchObject({ status: 'completed', summary: 'all done' })
    await idleAfter(wsId, 1)
    const decisions = await stack.audit(wsId, 'event_type=policy_decision')
    expect(decisions.length).toBe(2)
    expect(decisions.every((d: any) => d.decision === 'allow' && d.task_id === accepted.task_id)).toBe(true)
    const files = (await stack.api('GET', `/workspaces/${wsId}/snapshot/files`)).body.entries.map((e: any) => e.path)
    expect(files).toEqual(expect.arrayContaining(['report.md', 'notes-copy.txt', `uploads/${accepted.task_id}/notes.txt`]))
    expect(fake.store.list('persistentvolumeclaims', 'corral', `corral.dev/workspace=${wsId}`)).toHaveLength(1)
    expect(fake.store.get('networkpolicies', 'corral', 'corral-workspaces').spec).toMatchObject({ policyTypes: ['Ingress', 'Egress'] })

    // The agent's output, followed from the pod's log through the API server and shipped like the
    // local runtime's: `corral workspace logs` shows the line the reference agent writes to stderr at
    // a task's end (src/agent/main.ts), once.
    const line = new RegExp(`^task ${accepted.task_id}: completed after \\d+ iterations$`, 'm')
    await stack.until(async () => line.test((await stack.corral(['workspace', 'logs', wsId])).stdout), 'the agent output shipped')
    const chunks = JSON.parse((await stack.corral(['workspace', 'logs', wsId, '--agent', '--json'])).stdout)
    expect(chunks.map((c: any) => c.text).join('').match(new RegExp(line.source, 'gm'))).toHaveLength(1)
    expect(fake.requests.some((q) => q.path.endsWith('/log') && q.query.includes('follow=true'))).toBe(true)

    // Fork at 1 into a new claim; the follow-up reads the parent's file.
    const fork = await stack.api('POST', `/workspaces/${wsId}/fork`, { fork_point_task_count: 1 })
    expect(fork.status).toBe(202)
    const child: string = fork.body.workspace_id
    await stack.until(async () => (await stack.api('GET', `/workspaces/${child}`)).body.state === 'idle', 'fork provisioned')
    const follow = await stack.api('POST', `/workspaces/${child}/tasks`, { description: 'follow up: check the report' })
    expect(follow.status, JSON.stringify(follow.body)).toBe(202)
    expect(await stack.taskDone(follow.body.task_id)).toMatchObject({ status: 'completed' })
    await idleAfter(child, 1)
    const childFiles = (await stack.api('GET', `/workspaces/${child}/snapshot/files`)).body.entries.map((e: any) => e.path)
    expect(childFiles).toEqual(expect.arrayContaining(['report.md', 'seen-by-fork.txt']))

    // A pod evicted mid-task: the task fails, /data (with what the agent wrote) is snapshotted, the workspace is idle again.
    const lingering = await stack.api('POST', `/workspaces/${wsId}/tasks`, { description: 'linger a while' })
    expect(lingering.status).toBe(202)
    await stack.until(async () => (await stack.audit(wsId, 'event_type=tool_call')).some((e: any) => e.task_id === lingering.body.task_id), 'the lingering tool call')
    const agentPod = podsOf(wsId).find((p) => p.metadata.labels?.['corral.dev/pod-kind'] === 'agent' && !p.metadata.deletionTimestamp)!
    // The tool call is audited as it starts: evicted only once its command wrote the file (under
    // load the eviction came first and the file never existed to be snapshotted).
    const claim: string = (agentPod.spec as any).volumes.find((v: any) => v.persistentVolumeClaim).persistentVolumeClaim.claimName
    await stack.until(async () => existsSync(join(fake.kubelet.claimDir(claim), 'linger.txt')), 'the lingering command wrote its file')
    fake.kubelet.evict('corral', agentPod.metadata.name)
    expect(await stack.taskDone(lingering.body.task_id)).toMatchObject({ status: 'failed' })
    await idleAfter(wsId, 2)
    const after = (await stack.api('GET', `/workspaces/${wsId}/snapshot/files`)).body.entries.map((e: any) => e.path)
    expect(after).toContain('linger.txt')

    // Stop: the stop snapshot, then no pod left; the claim stays for a restart.
    const stopped = await stack.api('POST', `/workspaces/${child}/stop`)
    expect(stopped.body).toMatchObject({ status: 'stopped' })
    await stack.until(async () => podsOf(child).length === 0, 'the stopped workspace has no pod')
    expect(fake.store.list('persistentvolumeclaims', 'corral', `corral.dev/workspace=${child}`)).toHaveLength(1)
  }, 120_000)

  it('a pooled role keeps a warm pod; a task claims it (the same pod relabelled claimed) and the pool is refilled', async () => {
    // The stack's role's capabilities: the model's address as the stack wrote it.
    const { capabilities } = (await stack.api('GET', `/agent-roles/${stack.role!.id}`)).body
    const role = await stack.api('POST', '/agent-roles', { name: 'pooled', provider_id: stack.provider!.id, capabilities, pool_policy: 'static', pool_size: 1 })
    expect(role.status, JSON.stringify(role.body)).toBe(201)
    const warm = () => fake.store.list('pods', 'corral', `corral.dev/pool=warm,corral.dev/role=${role.body.id}`).filter((p) => !p.metadata.deletionTimestamp && p.status?.phase === 'Running')
    await stack.until(async () => warm().length === 1, 'one warm pod for the pooled role')
    const member = warm()[0]!
    const memberWs = member.metadata.labels!['corral.dev/workspace']!
    expect(fake.store.get('persistentvolumeclaims', 'corral', (member.spec as any).volumes.find((v: any) => v.name === 'data').persistentVolumeClaim.claimName).metadata.labels).toMatchObject({ 'corral.dev/pool': 'warm' })

    const task = await stack.api('POST', '/tasks', { role_name: 'pooled', description: 'Write a report' })
    expect(task.status, JSON.stringify(task.body)).toBe(202)
    expect(task.body.workspace_id).toBe(memberWs)
    const claimed = fake.store.get('pods', 'corral', member.metadata.name)
    expect(claimed.metadata.labels).toMatchObject({ 'corral.dev/pool': 'claimed' })
    expect(claimed.metadata.annotations).toMatchObject({ 'corral.dev/claimed-by': task.body.task_id })
    const claimedDone = await stack.taskDone(task.body.task_id)
    expect(claimedDone, `${JSON.stringify(claimedDone)}\n${stack.serve.output().slice(-3000)}`).toMatchObject({ status: 'completed' })
    // Refilled: a new member with its own warm pod.
    await stack.until(async () => warm().some((p) => p.metadata.labels!['corral.dev/workspace'] !== memberWs), 'the pool refilled with a new warm pod')
  }, 120_000)

})

// An agent CLI in a pod: its own fake API server whose kubelet runs agents as the pod's user
// (never root: Claude Code refuses to skip its permission prompts as root, and corral's pods set
// runAsUser), the CLI where the agent image keeps corral's dependencies (this checkout's
// node_modules, or CORRAL_TEST_AGENT_CLI_DIR).
describe('serve --runtime kubernetes: an agent CLI in the pod', () => {
  let stack: Stack
  let fake: FakeKube
  let service: Awaited<ReturnType<typeof serviceForwarder>> | undefined

  beforeAll(async () => {
    const cliDir = process.env.CORRAL_TEST_AGENT_CLI_DIR
    fake = await FakeKube.start({ runAsPodUser: true, imageRoots: [process.cwd(), dirname(process.execPath), ...(cliDir ? [cliDir] : [])] })
    service = await serviceForwarder()
    fake.store.create('services', 'corral', {
      apiVersion: 'v1', kind: 'Service', metadata: { name: 'corral-proxy' },
      spec: { clusterIP: '127.0.0.1', selector: { 'app.kubernetes.io/name': 'corral' }, ports: [{ name: 'proxy', port: service.port, targetPort: 'proxy' }] },
    })
    const kubeconfig = join(fake.kubelet.root, 'kubeconfig')
    writeFileSync(kubeconfig, fake.kubeconfig())
    stack = await startStack({
      model: claudeScript, role: { name: 'coder', capabilities: CAPS },
      args: ['--runtime', 'kubernetes'],
      env: { CORRAL_K8S_KUBECONFIG: kubeconfig, CORRAL_AGENT_IMAGE: 'corral-agent:test', ...(cliDir ? { CORRAL_AGENT_CLI_DIR: cliDir } : {}) },
    })
    service.to(Number(new URL(stack.proxyUrl).port))
  })
  afterAll(async () => {
    await stack?.close()
    await service?.close()
    await fake?.close()
  })

  it('a claude-code role runs the real Claude Code in the pod, through the proxy, with its file changes', async () => {
    const { capabilities } = (await stack.api('GET', `/agent-roles/${stack.role!.id}`)).body
    const role = await stack.api('POST', '/agent-roles', { name: 'claude', provider_id: stack.provider!.id, capabilities, agent_kind: 'claude-code' })
    expect(role.status, JSON.stringify(role.body)).toBe(201)
    const task = await stack.api('POST', '/tasks', { role_name: 'claude', description: 'write and count' })
    expect(task.status, JSON.stringify(task.body)).toBe(202)
    const done = await stack.until(async () => {
      const t = (await stack.api('GET', `/tasks/${task.body.task_id}`)).body
      return ['completed', 'failed', 'cancelled'].includes(t.status) && t
    }, 'the claude-code task', 120_000)
    expect(done, `${JSON.stringify(done)}\n${stack.serve.output().slice(-3000)}`).toMatchObject({ status: 'completed', summary: 'Claude Code ran in a pod.' })
    const wsId: string = task.body.workspace_id
    const agent = await stack.audit(wsId, 'actor=agent')
    expect(agent.filter((e: any) => e.event_type === 'tool_call').map((e: any) => e.detail.tool)).toEqual(['Write', 'Bash'])
    expect(agent.filter((e: any) => e.event_type === 'file_change').map((e: any) => e.detail.path)).toEqual(['from-claude.txt', 'counted.txt'])
    const decisions = await stack.audit(wsId, 'event_type=policy_decision')
    const model = decisions.filter((d: any) => d.path === '/v1/messages')
    expect(model).toHaveLength(3)
    expect(model.every((d: any) => d.decision === 'allow')).toBe(true)
    expect(decisions.filter((d: any) => d.path !== '/v1/messages' && !String(d.path).startsWith('/task'))).toEqual([])
  }, 180_000)
})
