// Transparent egress on bubblewrap: how every TCP connection an agent opens reaches the proxy
// without HTTPS_PROXY, and how its lookups reach corral's resolver (docs/runtime.md "Transparent
// egress"). In the sandbox's own network namespace, before the agent's uid is taken:
// - every IPv4 address is made local (`ip route add local default dev lo`), so a connect to any
//   address stays inside the namespace, and nftables' TPROXY hands each TCP connection that is not
//   to 127.0.0.0/8 to one listener, keeping the address and port the tool dialled as the accepted
//   socket's local address;
// - UDP to anything but loopback is routed into a tun device (`corral0`), whose packets a relay
//   hands to the init: each datagram is reported to the proxy (destination and port, for its deny row) and
//   goes nowhere; node cannot learn a datagram's original destination from a socket, but it can
//   read the IPv4 header of a packet;
// - everything else that would leave loopback (ICMP, all of IPv6 but ::1) is dropped in the kernel;
// - /etc/resolv.conf names 127.0.0.53, where the init answers by asking the proxy.
// The listener needs IP_TRANSPARENT, port 53 needs binding as root and the tun device needs
// TUNSETIFF, none of which node can ask for: a few lines of perl (perl-base is part of every Debian
// and most other systems) make the three sockets and the tun device as root, hand the sockets and
// the relay's end to the init as inherited descriptors, then exec setpriv, which drops to the
// agent's uid with no capability left. Without /dev/net/tun on the host, UDP is dropped in the kernel without a row.
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
/** The tun device non-DNS UDP is routed into, and the routing table that sends it there. */
export const SANDBOX_UDP_DEVICE = 'corral0'
const UDP_TABLE = 53
/**
 * The uid of the relay that holds the tun device: the overflow uid, never an agent's (agents take
 * uids of corral's own range, DEFAULT_SANDBOX_UID up), and non-dumpable besides (listen.pl).
 */
const RELAY_UID = 65534

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
    oifname "${SANDBOX_UDP_DEVICE}" meta l4proto udp accept
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

// The local table moves behind a rule that sends UDP (but to loopback) to the tun's table, which
// listen.pl fills once the device exists.
const SETUP = `set -e
ip route add local default dev lo
ip rule add pref 100 to 127.0.0.0/8 lookup local
ip rule add pref 200 ipproto udp lookup ${UDP_TABLE}
ip rule add pref 300 lookup local
ip rule del pref 0
nft -f ${SANDBOX_EGRESS_DIR}/rules.nft
exec perl ${SANDBOX_EGRESS_DIR}/listen.pl "$@"
`

// IP_TRANSPARENT is 19 on Linux (linux/in.h); Socket.pm does not name it.
const LISTEN = `use strict;
use Socket qw(PF_INET AF_UNIX SOCK_STREAM SOCK_DGRAM SOL_SOCKET SO_REUSEADDR INADDR_ANY inet_aton pack_sockaddr_in);
use Fcntl qw(F_GETFD F_SETFD FD_CLOEXEC F_GETFL F_SETFL O_NONBLOCK);
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
my @fds = (keep($tcp), keep($udp), keep($dns));
# TUNSETIFF with IFF_TUN | IFF_NO_PI: raw IP packets, one per read. The device stays with a relay
# process of its own, which hands each packet to the init over a datagram socket: the init runs as
# the agent's uid, so anything it held the agent could reopen through /proc/<init>/fd (a fresh tun
# descriptor). The relay changes to RELAY_UID in-process (no exec), which also leaves it
# non-dumpable: no process of the agent's can signal it, trace it or open its /proc/<pid>/fd.
# Declared out here: a handle made inside the block would be closed when the block ends.
my $reports;
if (open(my $tun, '+<', '/dev/net/tun')) {
  my $ifr = pack('Z16 s', '${SANDBOX_UDP_DEVICE}', 0x0001 | 0x1000);
  ioctl($tun, 0x400454ca, $ifr) or die "TUNSETIFF: $!";
  system('ip', 'link', 'set', '${SANDBOX_UDP_DEVICE}', 'up') == 0 or die "ip link: $?";
  system('ip', 'route', 'add', 'default', 'dev', '${SANDBOX_UDP_DEVICE}', 'table', '${UDP_TABLE}') == 0 or die "ip route: $?";
  socketpair(my $relay, $reports, AF_UNIX, SOCK_DGRAM, 0) or die "socketpair: $!";
  my $pid = fork() // die "fork: $!";
  if ($pid == 0) {
    require POSIX;
    opendir(my $d, '/proc/self/fd') or die "fds: $!";
    my @open = grep { /^\\d+$/ } readdir($d);
    closedir($d);
    for (@open) { POSIX::close($_) if $_ > 2 && $_ != fileno($tun) && $_ != fileno($relay) }
    $) = '${RELAY_UID} ${RELAY_UID}';
    POSIX::setgid(${RELAY_UID}) or die "setgid: $!";
    POSIX::setuid(${RELAY_UID}) or die "setuid: $!";
    die "relay uid" unless $< == ${RELAY_UID} && $> == ${RELAY_UID};
    # Blocking both ways: while the init lags, the tun device's own queue holds (and then drops).
    while (1) {
      my $n = sysread($tun, my $packet, 65536);
      if (!defined $n) { next if $! == POSIX::EINTR(); POSIX::_exit(1) }
      defined(send($relay, $packet, 0)) or POSIX::_exit(0);
    }
  }
  close($tun);
  close($relay);
  # Non-blocking: the init polls it (a blocking read would hold a thread of node's pool forever).
  fcntl($reports, F_SETFL, fcntl($reports, F_GETFL, 0) | O_NONBLOCK) or die "fcntl: $!";
  push @fds, keep($reports);
}
$ENV{CORRAL_EGRESS_FDS} = join(',', @fds);
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
