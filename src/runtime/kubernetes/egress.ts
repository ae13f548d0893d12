// Transparent egress on Kubernetes (docs/kubernetes.md "Transparent egress and DNS"): what a
// workspace pod gets so that tools that ignore HTTPS_PROXY still reach the proxy, with no
// capability in any container that runs while the agent does.
// - DNS: `dnsPolicy: None`, the pod's only nameserver 127.0.0.1, where the `egress` container
//   answers by asking the proxy over a CONNECT carrying the pod's token (so the proxy knows the
//   workspace from the token, as on bubblewrap). Port 53 is bound without a capability: the pod
//   sets the namespaced, "safe" sysctl net.ipv4.ip_unprivileged_port_start to 53.
// - Redirection: nftables rules in the pod's network namespace send every TCP connection that is
//   not to loopback or the proxy Service to the `egress` container's port (REDIRECT), and drop
//   everything else that would leave it. The rules are installed either by the `egress-init` init
//   container (mode `init`: NET_ADMIN alone, as istio-init does; it has exited before the agent
//   starts) or by the node's CNI plugin from the pod's annotations (mode `cni`: nothing in the pod
//   holds a capability at any time). The `egress` container learns each connection's original
//   destination with getsockopt(SO_ORIGINAL_DST), which needs no privilege, and hands it to the
//   proxy as the bubblewrap init does (a CONNECT marked x-corral-egress: transparent).
// - The namespace's NetworkPolicy is unchanged: egress to the proxy pods only, so a redirection
//   that is missing or fails open still reaches nothing.
import { SANDBOX_EGRESS_PORT } from '../egress.js'
import { proxyConnectSource } from '../proxy-connect-source.js'
import type { KubernetesSettings } from './options.js'

export const EGRESS_CONTAINER = 'egress'
export const EGRESS_INIT_CONTAINER = 'egress-init'
export const POD_EGRESS_DIR = '/run/corral/egress'
/** The port the `egress` container takes the redirected connections on. */
export const POD_REDIRECT_PORT = SANDBOX_EGRESS_PORT
/** Annotations a CNI plugin reads in mode `cni` (docs/kubernetes.md). */
export const EGRESS_ANNOTATION = {
  /** `redirect`: install the rules below for this pod. */
  mode: 'corral.dev/transparent-egress',
  /** The TCP port to redirect to. */
  port: 'corral.dev/egress-redirect-port',
  /** `<ip>:<port>` of the proxy Service: never redirected. */
  exclude: 'corral.dev/egress-exclude',
} as const
/** Secret keys of the egress files (mounted at POD_EGRESS_DIR). */
export const EGRESS_KEY = { relay: 'egress.relay.mjs', rules: 'egress.rules.nft' } as const

/** Where the proxy Service is, from its URL (`http://<cluster IP>:<port>`). */
export function proxyEndpoint(proxyUrl: string): { ip: string; port: number } {
  const url = new URL(proxyUrl)
  return { ip: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || 80) }
}

/** The rules of the pod's network namespace (what egress-init or the CNI plugin installs). */
// The filter chain matches the destination, not the output device: a redirected packet is
// rerouted to lo after the nat chain, but the hook still names the device it was first routed to.
// Replies of what was let out are let out (a connection can only be established through a rule).
export function egressRules(proxy: { ip: string; port: number }): string {
  return `table ip corral_egress {
  chain steer {
    type nat hook output priority -100; policy accept;
    ip daddr 127.0.0.0/8 return
    ip daddr ${proxy.ip} tcp dport ${proxy.port} return
    meta l4proto tcp redirect to :${POD_REDIRECT_PORT}
  }
  chain leave {
    type filter hook output priority filter; policy accept;
    ct state established,related accept
    ip daddr 127.0.0.0/8 accept
    ip daddr ${proxy.ip} tcp dport ${proxy.port} accept
    drop
  }
}
table ip6 corral_egress {
  chain leave {
    type filter hook output priority filter; policy accept;
    ip6 daddr ::1 accept
    drop
  }
}
`
}

/** The container security every container that runs beside the agent has (manifests.ts's CONTAINER_SECURITY). */
export interface ContainerSecurity {
  allowPrivilegeEscalation: boolean
  readOnlyRootFilesystem: boolean
  runAsNonRoot: boolean
  privileged: boolean
  capabilities: { drop: string[]; add?: string[] }
  seccompProfile: { type: string }
}

/** What transparent egress adds to an agent pod, or undefined when it is off. */
export function egressPodParts(s: KubernetesSettings, secretName: string, proxyUrl: string, security: ContainerSecurity, secretFileMode: number) {
  if (s.transparentEgress === 'off') return undefined
  const proxy = proxyEndpoint(proxyUrl)
  const mount = { name: 'egress', mountPath: POD_EGRESS_DIR, readOnly: true }
  return {
    annotations: (s.transparentEgress === 'cni'
      ? { [EGRESS_ANNOTATION.mode]: 'redirect', [EGRESS_ANNOTATION.port]: String(POD_REDIRECT_PORT), [EGRESS_ANNOTATION.exclude]: `${proxy.ip}:${proxy.port}` }
      : {}) as Record<string, string>,
    dnsPolicy: 'None',
    // No search list (a bare name is NXDOMAIN at once) and no other server to fall back to.
    dnsConfig: { nameservers: ['127.0.0.1'], searches: [], options: [{ name: 'ndots', value: '1' }, { name: 'timeout', value: '2' }, { name: 'attempts', value: '2' }] },
    sysctls: [{ name: 'net.ipv4.ip_unprivileged_port_start', value: '53' }],
    initContainers: s.transparentEgress === 'init'
      ? [{
        name: EGRESS_INIT_CONTAINER, image: s.egressInitImage, imagePullPolicy: s.imagePullPolicy,
        command: ['nft', '-f', `${POD_EGRESS_DIR}/rules.nft`],
        resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '100m', memory: '32Mi' } },
        // Root with NET_ADMIN alone, for the rules of its own pod's namespace; it exits before the agent starts.
        securityContext: { ...security, runAsNonRoot: false, runAsUser: 0, runAsGroup: 0, capabilities: { drop: ['ALL'], add: ['NET_ADMIN'] } },
        volumeMounts: [mount],
      }]
      : [],
    container: {
      name: EGRESS_CONTAINER, image: s.agentImage, imagePullPolicy: s.imagePullPolicy,
      command: ['node', `${POD_EGRESS_DIR}/relay.mjs`],
      env: [
        { name: 'CORRAL_EGRESS_PROXY', value: `${proxy.ip}:${proxy.port}` },
        { name: 'CORRAL_PROXY_TOKEN', valueFrom: { secretKeyRef: { name: secretName, key: 'proxy-token' } } },
      ],
      resources: { requests: { cpu: '10m', memory: '32Mi' }, limits: { cpu: '500m', memory: '128Mi', 'ephemeral-storage': '16Mi' } },
      securityContext: security,
      volumeMounts: [mount],
    },
    volume: { name: 'egress', secret: { secretName, defaultMode: secretFileMode, items: [{ key: EGRESS_KEY.relay, path: 'relay.mjs' }, { key: EGRESS_KEY.rules, path: 'rules.nft' }] } },
    secretData: { [EGRESS_KEY.relay]: EGRESS_RELAY_SOURCE, [EGRESS_KEY.rules]: egressRules(proxy) },
  }
}

interface ContainerLike { name?: string; securityContext?: Partial<ContainerSecurity> & { runAsUser?: number } }
interface PodLike { spec?: { securityContext?: { runAsNonRoot?: boolean; runAsUser?: number }; containers?: ContainerLike[]; initContainers?: ContainerLike[] } }

/**
 * What makes a workspace pod's running containers (not its init containers, which have exited
 * before the agent starts) anything but unprivileged: empty when each has no capability, cannot
 * escalate, is not privileged and does not run as root.
 */
export function privilegeProblems(manifest: { spec?: object }): string[] {
  const pod = manifest as PodLike
  const problems: string[] = []
  const podNonRoot = pod.spec?.securityContext?.runAsNonRoot === true && pod.spec.securityContext.runAsUser !== 0
  for (const c of pod.spec?.containers ?? []) {
    const sc = c.securityContext ?? {}
    if (sc.allowPrivilegeEscalation !== false) problems.push(`${c.name}: allowPrivilegeEscalation is not false`)
    if (sc.privileged) problems.push(`${c.name}: privileged`)
    if (!sc.capabilities?.drop?.includes('ALL')) problems.push(`${c.name}: capabilities are not all dropped`)
    if ((sc.capabilities?.add ?? []).length > 0) problems.push(`${c.name}: adds ${sc.capabilities!.add!.join(', ')}`)
    if (sc.runAsUser === 0 || (sc.runAsNonRoot === false) || (!podNonRoot && sc.runAsNonRoot !== true)) problems.push(`${c.name}: may run as root`)
  }
  return problems
}

// The `egress` container's program: plain JavaScript run by the agent image's node, kept as text
// and mounted from the pod's Secret (like sandbox-init.ts on bubblewrap, whose CONNECT, relay and
// DNS forwarding it shares: proxy-connect-source.ts). perl (perl-base) reads SO_ORIGINAL_DST
// (SOL_IP 80) of each redirected connection: node cannot call getsockopt.
export const EGRESS_RELAY_SOURCE = String.raw`import net from 'node:net'
import dgram from 'node:dgram'
import { spawn } from 'node:child_process'

const [proxyHost, proxyPort] = (process.env.CORRAL_EGRESS_PROXY || '').split(':')
const token = process.env.CORRAL_PROXY_TOKEN || ''
const REDIRECT_PORT = ${POD_REDIRECT_PORT}
const ORIGINAL_DST = 'my $a = getsockopt(STDIN, 0, 80) or exit 1; my ($f, $p, @h) = unpack("S n C4", $a); exit 1 unless $f == 2; print join(".", @h), ":", $p'

${proxyConnectSource('host: proxyHost, port: Number(proxyPort)')}
function originalDestination(socket, cb) {
  let out = ''
  const child = spawn('perl', ['-e', ORIGINAL_DST], { stdio: [socket, 'pipe', 'ignore'] })
  child.stdout.on('data', (d) => (out += d))
  child.on('error', () => cb(null))
  child.on('close', (code) => cb(code === 0 && /^\d+\.\d+\.\d+\.\d+:\d+$/.test(out) ? out : null))
}

const intercept = net.createServer({ allowHalfOpen: true, pauseOnConnect: true }, (inner) => {
  inner.on('error', () => inner.destroy())
  originalDestination(inner, (target) => {
    if (!target) { inner.destroy(); return }
    handOver(inner, target)
  })
})
intercept.listen(REDIRECT_PORT, '0.0.0.0')

const dnsTcp = net.createServer({ allowHalfOpen: true, pauseOnConnect: true }, resolveStream)
dnsTcp.listen(53, '127.0.0.1')

const udp = dgram.createSocket('udp4')
udp.on('error', () => {})
udp.on('message', (msg, rinfo) => resolveDatagram(udp, msg, rinfo))
udp.bind(53, '127.0.0.1')
process.on('SIGTERM', () => process.exit(0))
`
