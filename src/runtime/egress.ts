// Transparent egress on bubblewrap: how every TCP connection an agent opens reaches the proxy
// without HTTPS_PROXY, and how its lookups reach corral's resolver (docs/runtime.md "Transparent
// egress"). In the sandbox's own network namespace, before the agent's uid is taken:
// - every IPv4 address is made local (`ip route add local default dev lo`), so a connect to any
//   address stays inside the namespace, and nftables' TPROXY hands each TCP connection that is not
//   to 127.0.0.0/8 to one listener, keeping the address and port the tool dialled as the accepted
//   socket's local address;
// - everything else that would leave loopback (UDP other than the resolver, ICMP, all of IPv6 but
//   ::1) is dropped in the kernel;
// - /etc/resolv.conf names 127.0.0.53, where the init answers by asking the proxy.
// The listener needs IP_TRANSPARENT and port 53 needs binding as root, neither of which node can
// ask for: a few lines of perl (perl-base is part of every Debian and most other systems) make the
// three sockets as root and hand them to the init as inherited descriptors, then exec setpriv,
// which drops to the agent's uid with no capability left.
import { existsSync } from 'node:fs'
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'

/** Where the egress files are bound inside the sandbox. */
export const SANDBOX_EGRESS_DIR = '/run/corral/egress'
/** The resolver address in the sandbox (what /etc/resolv.conf names). */
export const SANDBOX_RESOLVER = '127.0.0.53'
/** `off` turns transparent egress off: for serve (all workspaces) or in a workspace's pack `agent.env` (that one). */
export const EGRESS_OPT_OUT = 'CORRAL_TRANSPARENT_EGRESS'
/** The port the TPROXY listener takes inside the namespace (never dialled by anyone). */
export const SANDBOX_EGRESS_PORT = 15001

export interface EgressFiles {
  /** Directory holding setup.sh, listen.pl and rules.nft, bound at SANDBOX_EGRESS_DIR. */
  dir: string
  resolvConf: string
}

const RULES = `table ip corral_egress {
  chain prerouting {
    type filter hook prerouting priority mangle; policy accept;
    ip daddr != 127.0.0.0/8 meta l4proto tcp tproxy to :${SANDBOX_EGRESS_PORT} accept
  }
  chain output {
    type filter hook output priority filter; policy accept;
    ip daddr != 127.0.0.0/8 meta l4proto != tcp drop
  }
}
table ip6 corral_egress {
  chain output {
    type filter hook output priority filter; policy accept;
    ip6 daddr != ::1 drop
  }
}
`

const SETUP = `set -e
ip route add local default dev lo
nft -f ${SANDBOX_EGRESS_DIR}/rules.nft
exec perl ${SANDBOX_EGRESS_DIR}/listen.pl "$@"
`

// IP_TRANSPARENT is 19 on Linux (linux/in.h); Socket.pm does not name it.
const LISTEN = `use strict;
use Socket qw(PF_INET SOCK_STREAM SOCK_DGRAM SOL_SOCKET SO_REUSEADDR INADDR_ANY inet_aton pack_sockaddr_in);
use Fcntl qw(F_GETFD F_SETFD FD_CLOEXEC);
sub keep { my ($s) = @_; my $f = fcntl($s, F_GETFD, 0) or die "fcntl: $!"; fcntl($s, F_SETFD, $f & ~FD_CLOEXEC) or die "fcntl: $!"; fileno($s) }
socket(my $tcp, PF_INET, SOCK_STREAM, 0) or die "socket: $!";
setsockopt($tcp, SOL_SOCKET, SO_REUSEADDR, 1) or die "reuseaddr: $!";
setsockopt($tcp, 0, 19, 1) or die "IP_TRANSPARENT: $!";
bind($tcp, pack_sockaddr_in(${SANDBOX_EGRESS_PORT}, INADDR_ANY)) or die "bind egress: $!";
listen($tcp, 1024) or die "listen: $!";
socket(my $udp, PF_INET, SOCK_DGRAM, 0) or die "socket: $!";
bind($udp, pack_sockaddr_in(53, inet_aton('${SANDBOX_RESOLVER}'))) or die "bind dns/udp: $!";
socket(my $dns, PF_INET, SOCK_STREAM, 0) or die "socket: $!";
bind($dns, pack_sockaddr_in(53, inet_aton('${SANDBOX_RESOLVER}'))) or die "bind dns/tcp: $!";
listen($dns, 128) or die "listen: $!";
$ENV{CORRAL_EGRESS_FDS} = join(',', keep($tcp), keep($udp), keep($dns));
exec { $ARGV[0] } @ARGV or die "exec $ARGV[0]: $!";
`

/** Writes the egress files into `dir` (the runtime's shared dir). */
export async function writeEgressFiles(dir: string): Promise<EgressFiles> {
  const egress = join(dir, 'egress')
  await mkdir(egress, { recursive: true })
  await writeFile(join(egress, 'rules.nft'), RULES)
  await writeFile(join(egress, 'setup.sh'), SETUP)
  await writeFile(join(egress, 'listen.pl'), LISTEN)
  const resolvConf = join(dir, 'resolv.conf')
  // One resolver, no search list (a bare name is NXDOMAIN at once), short timeouts: it is local.
  await writeFile(resolvConf, `nameserver ${SANDBOX_RESOLVER}\noptions timeout:2 attempts:2\n`)
  return { dir: egress, resolvConf }
}

/** The command that sets the namespace up as root and then runs `inner` (setpriv …). */
export function egressCommand(inner: readonly string[]): string[] {
  return ['/bin/sh', `${SANDBOX_EGRESS_DIR}/setup.sh`, ...inner]
}

const TOOLS = ['ip', 'nft', 'perl']
const TOOL_DIRS = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin']

/** The setup's tools that this host lacks (iproute2, nftables, perl): transparent egress needs all three. */
export function missingEgressTools(): string[] {
  return TOOLS.filter((t) => !TOOL_DIRS.some((d) => existsSync(join(d, t))))
}
