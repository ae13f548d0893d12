import { existsSync, lstatSync, readlinkSync, statSync, type Stats } from 'node:fs'
import { dirname, isAbsolute, relative, resolve, sep } from 'node:path'
import { SANDBOX_AGENT_CLI_DIR } from '../contract/index.js'
import { SANDBOX_EGRESS_DIR, egressCommand, type EgressFiles } from './egress.js'

/** Inside-the-sandbox paths (the contract the agent sees). */
export const SANDBOX_DATA = '/data'
export const SANDBOX_RUN = '/run/corral'
export const SANDBOX_PROXY_SOCKET = `${SANDBOX_RUN}/proxy.sock`
export const SANDBOX_INIT = `${SANDBOX_RUN}/init.mjs`
export const SANDBOX_CA = `${SANDBOX_RUN}/corral-ca.pem`
export const SANDBOX_CA_BUNDLE = `${SANDBOX_RUN}/ca-bundle.pem`
export const SANDBOX_INBOX = `${SANDBOX_RUN}/inbox`
/** Where packs are mounted (pack-mounts.ts). */
export const SANDBOX_PACKS = '/packs'
/** The loopback port the in-sandbox forwarder listens on; each sandbox has its own loopback. */
export const SANDBOX_PROXY_PORT = 3128
/** The agent's uid/gid inside the user namespace: never root, so it holds no capability there either. */
export const SANDBOX_UID = 1000

/**
 * The first uid of the agents' range (CORRAL_SANDBOX_UID), the driver's own: above every range a
 * distribution hands out (system and login users, systemd's dynamic, container and foreign ranges,
 * /etc/subuid's) and below 2^31, which some tools read as signed.
 */
export const DEFAULT_SANDBOX_UID = 2_000_000_000

/** System directories bound read-only. Merged-/usr distributions have symlinks for the top-level ones. */
const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib64', '/lib32', '/libx32', '/opt']
/**
 * Only these parts of /etc: the host's /etc holds secrets (shadow, ssh host keys, corral's own
 * config) that the sandbox uid, mapped to the user running corral, could otherwise read.
 */
const ETC_ENTRIES = [
  'ssl', 'ca-certificates', 'pki', 'alternatives', 'ld.so.cache', 'ld.so.conf', 'ld.so.conf.d', 'localtime',
  'nsswitch.conf', 'hosts', 'host.conf', 'protocols', 'services', 'mime.types', 'os-release', 'debian_version',
  'profile', 'bash.bashrc', 'inputrc', 'gitconfig', 'timezone', 'magic', 'papersize',
]

export interface SandboxMounts {
  dataDir: string
  init: string
  passwd: string
  group: string
  proxySocket: string
  /** Read-only directory of files handed to the agent. */
  inbox: string | null
  /** Pack content trees, bound read-only at /packs/<name> (names checked by pack-mounts.ts). */
  packs: readonly { name: string; dir: string }[]
  /** The agent CLI's package directory (agent-clis.ts), bound read-only at SANDBOX_AGENT_CLI_DIR. */
  agentCli?: string | null
  ca: string | null
  caBundle: string | null
  /** Host paths made visible read-only at the same place (the corral package, the node install). */
  readOnly: readonly string[]
  /**
   * Host paths hidden when they lie inside a read-only path (serve's data dir, the runtime root, a
   * SQLite file kept elsewhere): a directory under an empty tmpfs, a file under /dev/null.
   */
  hide: readonly string[]
  disableUserns: boolean
  /**
   * serve runs as root: no user namespace (root's would map the agent to host root); the sandbox
   * is set up by root with every capability dropped but the two that setpriv needs, and the agent
   * then runs as this unprivileged host uid/gid (docs/runtime.md "Running as root").
   */
  dropTo?: { uid: number; gid: number }
  /** Size of the private /tmp in bytes (its pages count against the workspace's memory); 0 = unsized. */
  tmpBytes?: number
  /** An fd (opened by the launcher) holding the seccomp filter that refuses nested user namespaces (seccomp.ts). */
  seccompFd?: number
  /** Transparent egress (egress.ts): as root only, the namespace is set up before the uid is dropped. */
  egress?: EgressFiles
}

/** Where setpriv is looked up inside the sandbox (bound through /usr). */
export const SETPRIV = '/usr/bin/setpriv'

/**
 * The bubblewrap argv for one workspace: fresh user, PID, network, IPC, UTS and cgroup namespaces
 * (`--unshare-all` without `--share-net`, so only a loopback interface exists), read-only system
 * dirs, private /tmp, /dev and /proc, the workspace at /data, and the proxy socket, init and CA
 * under /run/corral. The environment is not here: it is passed to bwrap itself, which hands it on.
 */
export function bwrapArgs(m: SandboxMounts, command: readonly string[]): string[] {
  const args: string[] = m.dropTo
    ? ['--unshare-ipc', '--unshare-pid', '--unshare-net', '--unshare-uts', '--unshare-cgroup-try',
      '--hostname', 'corral', '--die-with-parent', '--new-session', '--cap-drop', 'ALL', '--cap-add', 'CAP_SETUID', '--cap-add', 'CAP_SETGID']
    : ['--unshare-all', '--unshare-user', '--uid', String(SANDBOX_UID), '--gid', String(SANDBOX_UID),
      '--hostname', 'corral', '--die-with-parent', '--new-session', '--cap-drop', 'ALL']
  // The egress setup (routes, nftables, the listener's sockets) needs these two until setpriv drops
  // every capability; the agent never holds them.
  const egress = m.dropTo ? m.egress : undefined
  if (egress) args.push('--cap-add', 'CAP_NET_ADMIN', '--cap-add', 'CAP_NET_BIND_SERVICE')
  if (m.disableUserns && !m.dropTo) args.push('--disable-userns')
  if (m.seccompFd !== undefined) args.push('--seccomp', String(m.seccompFd))
  for (const dir of SYSTEM_DIRS) {
    if (!existsSync(dir)) continue
    const st = lstatSync(dir)
    if (st.isSymbolicLink()) args.push('--symlink', readlinkSync(dir), dir)
    else args.push('--ro-bind', dir, dir)
  }
  args.push('--proc', '/proc', '--dev', '/dev')
  // The egress setup opens it as root for the UDP reports (egress.ts). A bound node cannot be
  // removed (it is a mount point) and an unlink through a shared /dev would reach the host's, so it
  // stays, in a directory only root may enter: the agent's uid can neither list nor open it.
  if (egress) args.push('--perms', '0700', '--dir', '/dev/net', '--dev-bind-try', '/dev/net/tun', '/dev/net/tun')
  // /tmp is RAM: sized to the workspace's memory (a write past it fails with ENOSPC), and its
  // pages are charged to the workspace's memory cgroup besides. Root sets it up, so it is opened
  // to everyone (sticky) for the agent's uid.
  if (m.dropTo) args.push('--perms', '1777')
  if (m.tmpBytes && m.tmpBytes > 0) args.push('--size', String(m.tmpBytes))
  args.push('--tmpfs', '/tmp', '--dir', '/etc')
  for (const entry of ETC_ENTRIES) {
    const path = `/etc/${entry}`
    const link = linkIntoSystemDirs(path)
    if (link) args.push('--symlink', link, path)
    else args.push('--ro-bind-try', path, path)
  }
  args.push('--ro-bind', m.passwd, '/etc/passwd', '--ro-bind', m.group, '/etc/group')
  if (egress) args.push('--ro-bind', egress.resolvConf, '/etc/resolv.conf')
  const made = new Set<string>()
  for (const path of m.readOnly) {
    if (SYSTEM_DIRS.some((d) => path === d || path.startsWith(`${d}${sep}`))) continue
    // As root, bwrap makes a bound path's missing parents with the host's modes (/root is 0700):
    // made first, traversable, so the agent's uid reaches what is bound below them.
    if (m.dropTo) {
      for (const parent of ancestors(path)) {
        if (made.has(parent) || m.readOnly.some((r) => r !== path && (parent === r || parent.startsWith(`${r}${sep}`)))) continue
        made.add(parent)
        args.push('--perms', '0755', '--dir', parent)
      }
    }
    args.push('--ro-bind', path, path)
  }
  for (const path of m.hide) {
    const st = statOrNull(path)
    if (st?.isDirectory()) args.push('--tmpfs', path)
    else if (st) args.push('--ro-bind', '/dev/null', path)
  }
  args.push('--bind', m.dataDir, SANDBOX_DATA)
  args.push('--dir', SANDBOX_RUN, '--ro-bind', m.init, SANDBOX_INIT, '--ro-bind', m.proxySocket, SANDBOX_PROXY_SOCKET)
  if (m.inbox) args.push('--ro-bind', m.inbox, SANDBOX_INBOX)
  if (egress) args.push('--ro-bind', egress.dir, SANDBOX_EGRESS_DIR)
  // /packs exists even without packs, so an agent can always list it.
  args.push('--dir', SANDBOX_PACKS)
  for (const p of m.packs) args.push('--ro-bind', p.dir, `${SANDBOX_PACKS}/${p.name}`)
  if (m.agentCli) args.push('--ro-bind', m.agentCli, SANDBOX_AGENT_CLI_DIR)
  if (m.ca) args.push('--ro-bind', m.ca, SANDBOX_CA)
  if (m.caBundle) args.push('--ro-bind', m.caBundle, SANDBOX_CA_BUNDLE)
  // Everything not mounted above lives on bwrap's scratch root; freeze it so /data and /tmp are the
  // only writable places.
  // As root: the first command inside drops to the agent's uid, with no way back (no_new_privs,
  // no inheritable capabilities); bwrap left it CAP_SETUID/CAP_SETGID for exactly this.
  // It enters /data only then: root without CAP_DAC_OVERRIDE may not, the agent owns its mode.
  const dropped = m.dropTo
    ? [SETPRIV, `--reuid=${m.dropTo.uid}`, `--regid=${m.dropTo.gid}`, '--clear-groups', '--inh-caps=-all', '--no-new-privs', '--',
      '/bin/sh', '-c', `cd ${SANDBOX_DATA} && exec "$@"`, 'corral-enter', ...command]
    : command
  const inner = egress ? egressCommand(dropped) : dropped
  args.push('--remount-ro', '/', ...(m.dropTo ? [] : ['--chdir', SANDBOX_DATA]), '--', ...inner)
  return args
}

/** The directories above `path` that the sandbox's own root holds (not /, /tmp or the system dirs). */
function ancestors(path: string): string[] {
  const out: string[] = []
  for (let dir = dirname(path); dir !== '/' && dir !== '.'; dir = dirname(dir)) {
    if (dir === '/tmp' || SYSTEM_DIRS.some((d) => dir === d || dir.startsWith(`${d}${sep}`))) break
    out.unshift(dir)
  }
  return out
}

/**
 * Paths of `paths` that lie inside one of `parents` (only those need hiding), less those inside
 * another such path (hiding the outer one hides them).
 */
export function nestedIn(paths: readonly string[], parents: readonly string[]): string[] {
  const inside = (p: string, parent: string): boolean => {
    const rel = relative(parent, p)
    return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel))
  }
  const nested = [...new Set(paths.map((p) => resolve(p)))].filter((p) => parents.some((parent) => inside(p, parent)))
  return nested.filter((p) => !nested.some((q) => q !== p && inside(p, q)))
}

function statOrNull(path: string): Stats | null {
  try {
    return statSync(path)
  } catch {
    return null
  }
}

/**
 * The target of `path` when it is a symlink to something inside the bound system dirs, so the
 * sandbox gets the same link rather than a copy. Programs read meaning from such links: ICU names
 * the time zone from /etc/localtime's target, and given a copy it compares the file with every
 * zoneinfo file instead (10-60 ms at each process's first date formatting, docs/runtime.md
 * "Benchmark").
 */
function linkIntoSystemDirs(path: string): string | undefined {
  try {
    if (!lstatSync(path).isSymbolicLink()) return undefined
    const target = readlinkSync(path)
    const resolved = resolve(dirname(path), target)
    return SYSTEM_DIRS.some((d) => resolved.startsWith(`${d}${sep}`)) && existsSync(resolved) ? target : undefined
  } catch {
    return undefined
  }
}

/** The install prefix of the node binary (e.g. /usr or ~/.nvm/versions/node/v20), bound read-only. */
export function nodePrefix(execPath = process.execPath): string {
  return dirname(dirname(execPath))
}
