// The Kubernetes driver's transparent egress for real, without a cluster: a network namespace
// stands in for the pod's, and it gets exactly what the agent pod's manifest says — the init
// container's command (under a bounding set of NET_ADMIN alone), the `egress` container's program
// and environment from the pod's Secret (as the pod's non-root user, no capability at all), the
// pod's sysctl and its dnsConfig as /etc/resolv.conf — while the agent's commands run as the pod's
// user with HTTPS_PROXY unset. The proxy Service's cluster IP is an address on the namespace's
// loopback forwarded to the real proxy (kube-proxy's part). What this cannot show: a real kubelet,
// container runtime and CNI doing the same (docs/kubernetes.md "Transparent egress and DNS").
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { chmod, chown, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { kubernetesSettingsFromEnv } from '../../../src/runtime/index.js'
import { EGRESS_CONTAINER, EGRESS_INIT_CONTAINER, agentPod, agentSecret, podName } from '../../../src/runtime/kubernetes/index.js'
import { DEFAULT_LIMITS } from '../../../src/runtime/limits.js'
import { startHarness, type Harness } from '../../proxy/harness.js'
import { startNamedUpstreams, type NamedUpstreams } from '../../proxy/transparent-harness.js'

const run = promisify(execFile)
const tools = ['/usr/sbin/ip', '/usr/sbin/nft', '/usr/bin/socat', '/usr/bin/perl', '/usr/bin/setpriv'].every((t) => existsSync(t) || existsSync(t.replace('/usr/sbin', '/sbin')))
const available = process.getuid?.() === 0 && tools

const SERVICE = { ip: '10.96.0.12', port: 7071 }

type Container = { name: string; command: string[]; env?: { name: string; value?: string; valueFrom?: { secretKeyRef: { key: string } } }[] }

describe.skipIf(!available)('Kubernetes transparent egress in a pod-like network namespace', () => {
  let h: Harness
  let up: NamedUpstreams
  let dir: string
  let ns: string
  let workspaceId: string
  const procs: ChildProcess[] = []
  let relay: ChildProcess
  let uid: number
  let env: Record<string, string>

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'corral-k8s-netns-'))
    await chmod(dir, 0o755)
    up = await startNamedUpstreams(join(dir, 'up'))
    h = await startHarness({ resolve: async () => [{ address: '127.0.0.1', family: 4 }], upstreamCaPem: [up.caPem] })
    const caps = `
- name: allowed-api
  type: http
  allow:
    - domains: ["api.allowed.dev:${up.httpsPort}"]
      methods: [GET]
      allow_private: ["127.0.0.0/8"]
`
    const w = await h.workspace(caps, 'idle', { raw: true })
    workspaceId = w.workspaceId
    // The manifests the driver would create for this workspace.
    const s = kubernetesSettingsFromEnv({ CORRAL_AGENT_IMAGE: 'corral-agent:test', CORRAL_K8S_TRANSPARENT_EGRESS: 'init' }, DEFAULT_LIMITS)
    const name = podName(workspaceId, 'n1234')
    const spec = { command: ['true'], proxyToken: w.token, proxyUrl: `http://${SERVICE.ip}:${SERVICE.port}`, caPem: h.proxy.ca.certPem, files: {}, env: {}, baseEnv: {}, stopGraceSeconds: 1 }
    const pod = agentPod(s, name, workspaceId, {}, spec)
    const secret = agentSecret(s, name, workspaceId, {}, spec).stringData
    uid = pod.spec.securityContext.runAsUser
    // The Secret volume, as the kubelet writes it.
    const egressDir = join(dir, 'egress')
    await mkdir(egressDir, { mode: 0o755 })
    const volume = pod.spec.volumes.find((v) => v.name === 'egress') as { secret: { items: { key: string; path: string }[]; defaultMode: number } }
    // The kubelet gives a Secret volume's files to the pod's fsGroup with the group read bit added.
    const fsGroup = pod.spec.securityContext.fsGroup
    for (const item of volume.secret.items) {
      await writeFile(join(egressDir, item.path), secret[item.key]!, { mode: volume.secret.defaultMode | 0o440 })
      await chown(join(egressDir, item.path), 0, fsGroup)
    }
    await writeFile(join(dir, 'ca.pem'), h.proxy.ca.certPem, { mode: 0o444 })
    const mapPath = (arg: string) => arg.replace('/run/corral/egress', egressDir)

    ns = `corral-t-${randomBytes(3).toString('hex')}`
    await run('ip', ['netns', 'add', ns])
    await run('ip', ['-n', ns, 'link', 'set', 'lo', 'up'])
    // The CNI's part: the pod's eth0 and default route (a veth whose peer leads nowhere: what is not
    // redirected is lost, as the NetworkPolicy would drop it).
    await run('ip', ['-n', ns, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'nowhere'])
    await run('ip', ['-n', ns, 'link', 'set', 'nowhere', 'up'])
    await run('ip', ['-n', ns, 'addr', 'add', '10.244.0.5/24', 'dev', 'eth0'])
    await run('ip', ['-n', ns, 'link', 'set', 'eth0', 'up'])
    await run('ip', ['-n', ns, 'route', 'add', 'default', 'via', '10.244.0.1', 'dev', 'eth0'])
    // kube-proxy's part: the Service's cluster IP reaches the proxy.
    await run('ip', ['-n', ns, 'addr', 'add', `${SERVICE.ip}/32`, 'dev', 'lo'])
    const sock = join(dir, 'svc.sock')
    procs.push(spawn('socat', [`UNIX-LISTEN:${sock},fork`, `TCP:127.0.0.1:${new URL(h.proxyUrl).port}`], { stdio: 'ignore' }))
    while (!existsSync(sock)) await sleep(20)
    procs.push(spawn('ip', ['netns', 'exec', ns, 'socat', `TCP-LISTEN:${SERVICE.port},bind=${SERVICE.ip},fork,reuseaddr`, `UNIX-CONNECT:${sock}`], { stdio: 'ignore' }))
    // The kubelet's part: the pod's sysctls and its dnsConfig as the pod's resolv.conf.
    for (const { name: key, value } of (pod.spec.securityContext as { sysctls?: { name: string; value: string }[] }).sysctls ?? []) await run('ip', ['netns', 'exec', ns, 'sysctl', '-qw', `${key}=${value}`])
    const dns = pod.spec.dnsConfig!
    await mkdir(`/etc/netns/${ns}`, { recursive: true })
    await writeFile(`/etc/netns/${ns}/resolv.conf`, `${dns.nameservers.map((n) => `nameserver ${n}`).join('\n')}\noptions ${dns.options.map((o) => `${o.name}:${o.value}`).join(' ')}\n`)
    // The init container: root with NET_ADMIN alone.
    const init = (pod.spec.initContainers as Container[]).find((c) => c.name === EGRESS_INIT_CONTAINER)!
    await run('ip', ['netns', 'exec', ns, 'setpriv', '--bounding-set=-all,+net_admin', '--inh-caps=-all', '--', ...init.command.map(mapPath)])
    // The egress container: the pod's user, no capability.
    const c = (pod.spec.containers as Container[]).find((x) => x.name === EGRESS_CONTAINER)!
    env = {}
    for (const e of c.env ?? []) env[e.name] = e.value ?? secret[e.valueFrom!.secretKeyRef.key]!
    relay = spawn('ip', ['netns', 'exec', ns, ...dropTo(uid, fsGroup), ...c.command.map(mapPath)], { env: { PATH: process.env.PATH!, ...env }, stdio: ['ignore', 'inherit', 'inherit'] })
    procs.push(relay)
    // Up when it listens on both ports (it binds 15001 first and 53 last).
    for (let i = 0; i < 600; i++) {
      const { stdout } = await run('ip', ['netns', 'exec', ns, 'ss', '-Hlun', 'sport = :53'])
      if (stdout.trim()) break
      await sleep(50)
    }
  })

  afterAll(async () => {
    for (const p of procs) p.kill('SIGKILL')
    if (ns) {
      await run('ip', ['netns', 'del', ns]).catch(() => {})
      await rm(`/etc/netns/${ns}`, { recursive: true, force: true })
    }
    await h?.close()
    await up?.close()
    if (dir) await rm(dir, { recursive: true, force: true })
  })

  const dropTo = (u: number, group = u) => ['setpriv', `--reuid=${u}`, `--regid=${u}`, `--groups=${group}`, '--inh-caps=-all', '--bounding-set=-all', '--no-new-privs', '--']

  it('the relay runs as the pod\'s user with no capability; lookups and connections reach the proxy, decided and attributed', async () => {
    const status = await readFile(`/proc/${relay.pid}/status`, 'utf8')
    // `ip netns exec` and setpriv exec in place: the pid is the relay's own.
    expect(status).toMatch(new RegExp(`^Uid:\\s+${uid}\\s`, 'm'))
    expect(status).toMatch(/^CapEff:\s+0+$/m)
    expect(status).toMatch(/^CapPrm:\s+0+$/m)
    const script = String.raw`
dig +short +time=3 +tries=1 api.allowed.dev
getent hosts api.allowed.dev | cut -d' ' -f1
curl -sS --max-time 10 --cacert "$CA" https://api.allowed.dev:$HTTPS_PORT/k8s-curl 2>&1; echo
curl -sS --max-time 10 --cacert "$CA" -o /dev/null -w '%{http_code}\n' https://denied.elsewhere.dev:$HTTPS_PORT/k8s-denied
timeout 10 node -e "require('dns').lookup('api.allowed.dev', { family: 4 }, (e, a) => { const s = require('net').connect(22, a, () => s.write('SSH-2.0-OpenSSH_9.6\r\n')); s.on('data', (d) => console.log('ssh-answered ' + d)); s.on('close', () => console.log('ssh-closed')); s.on('error', (e) => console.log('ssh-' + e.code)) })"
curl -sS --max-time 3 http://${SERVICE.ip}:1/ > /dev/null 2>&1; echo "other-port $?"
`
    const { stdout } = await run('ip', ['netns', 'exec', ns, ...dropTo(uid), 'bash', '-c', script], { env: { PATH: process.env.PATH!, CA: join(dir, 'ca.pem'), HTTPS_PORT: String(up.httpsPort), HOME: '/tmp' }, timeout: 60_000 })
    const lines = stdout.trim().split('\n')
    expect(lines[0]).toMatch(/^100\.\d+\.\d+\.\d+$/)
    expect(lines[1]).toBe(lines[0])
    expect(lines[2]).toBe('hello api.allowed.dev')
    expect(lines[3]).toBe('403')
    expect(lines[4]).toBe('ssh-closed')
    // Another port of the proxy Service is redirected like any destination (and refused there).
    expect(lines[5]).not.toBe('other-port 0')
    expect(up.hits).toContain('api.allowed.dev /k8s-curl')
    expect(up.hits.some((x) => x.startsWith('denied.elsewhere.dev'))).toBe(false)
    const rows = h.audit.decisions().filter((r) => r.workspace_id === workspaceId)
    expect(rows.filter((r) => r.policy_type === 'dns' && r.destination === 'api.allowed.dev').length).toBeGreaterThanOrEqual(2)
    expect(rows.filter((r) => r.path === '/k8s-curl')).toEqual([expect.objectContaining({ decision: 'allow', capability_name: 'allowed-api', policy_type: 'http' })])
    expect(rows.filter((r) => r.path === '/k8s-denied')).toEqual([expect.objectContaining({ decision: 'deny', reason: 'no_match', destination: 'denied.elsewhere.dev' })])
    expect(rows.find((r) => r.detail?.protocol === 'ssh')).toMatchObject({ decision: 'deny', destination: 'api.allowed.dev', detail: { port: 22, egress: 'transparent' } })
  }, 90_000)

  it('the agent cannot undo the redirection or leave by another way', async () => {
    const script = String.raw`
nft flush ruleset > /dev/null 2>&1; echo "flush $?"
python3 -c "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('198.51.100.7', 9999))" > /dev/null 2>&1; echo "udp $?"
python3 -c "import socket; s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM); s.settimeout(3); s.connect(('2001:db8::1', 443))" > /dev/null 2>&1; echo "ipv6 $?"
`
    const { stdout } = await run('ip', ['netns', 'exec', ns, ...dropTo(uid), 'bash', '-c', script], { env: { PATH: process.env.PATH! }, timeout: 30_000 })
    expect(stdout.trim().split('\n')).toEqual(['flush 1', 'udp 1', 'ipv6 1'])
    const { stdout: rules } = await run('ip', ['netns', 'exec', ns, 'nft', 'list', 'ruleset'])
    expect(rules).toContain('redirect to :15001')
  })
})
