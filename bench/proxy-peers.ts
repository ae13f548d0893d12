// The benchmark's peers, started next to corral on loopback (bench/proxy.ts):
//  - squid as a plain CONNECT tunnel (no inspection: the floor for any proxy);
//  - squid ssl-bump (Debian's squid-openssl): TLS interception with a certificate minted per host
//    by security_file_certgen from its own CA, and a method + path ACL on the decrypted requests,
//    i.e. the same kind of work as corral (terminate TLS, look at the request, re-encrypt);
//  - mitmproxy (mitmdump) as an intercepting peer, when it is installed.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { chownSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { connect, createServer as createNetServer, type AddressInfo } from 'node:net'
import { join } from 'node:path'

export const CERTGEN = '/usr/lib/squid/security_file_certgen'

export interface Peer { name: string; port: number; pid: number; /** the CA that the client must trust for the inner TLS */ caPem: string }

export function has(bin: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${bin}`], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

export function freePort(): Promise<number> {
  return new Promise((r) => {
    const srv = createNetServer()
    srv.listen(0, '127.0.0.1', () => {
      const p = (srv.address() as AddressInfo).port
      srv.close(() => r(p))
    })
  })
}

export async function waitPort(port: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const ok = await new Promise<boolean>((r) => {
      const s = connect(port, '127.0.0.1', () => (s.end(), r(true)))
      s.on('error', () => r(false))
    })
    if (ok) return
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`port ${port} never opened`)
}

const SQUID_COMMON = (tmp: string, tag: string): string[] => [
  'cache deny all', 'access_log none', `cache_log ${join(tmp, `${tag}-cache.log`)}`, `pid_filename ${join(tmp, `${tag}.pid`)}`,
  `coredump_dir ${tmp}`, 'shutdown_lifetime 0 seconds', 'via off', 'forwarded_for delete',
  // Keep-alive on both sides, like corral's pooled upstream client.
  'client_persistent_connections on', 'server_persistent_connections on',
]

export async function startSquidTunnel(tmp: string, upCaPem: string, children: ChildProcess[]): Promise<Peer> {
  const port = await freePort()
  const conf = join(tmp, 'squid.conf')
  writeFileSync(conf, [`http_port 127.0.0.1:${port}`, 'acl CONNECT method CONNECT', 'http_access allow all', ...SQUID_COMMON(tmp, 'squid')].join('\n') + '\n')
  const squid = spawn('squid', ['-N', '-f', conf], { stdio: 'ignore' })
  children.push(squid)
  await waitPort(port)
  return { name: 'squid', port, pid: squid.pid!, caPem: upCaPem }
}

/**
 * squid with ssl-bump: peeks at the client hello (step 1), then bumps; per-host certificates
 * are minted by security_file_certgen into its own database; decrypted requests must match
 * method + path (POST /v1/messages|/mcp, GET /v1/stream|/v1/hold|/v1/ws), everything else is
 * denied; WebSocket upgrades are let through (squid relays their bytes, it does not read frames).
 * squid speaks no HTTP/2 to clients, so it has no h2 figures.
 */
export async function startSquidBump(tmp: string, upCaFile: string, children: ChildProcess[]): Promise<Peer> {
  const port = await freePort()
  const dir = join(tmp, 'bump')
  mkdirSync(dir, { recursive: true })
  const key = join(dir, 'ca-key.pem')
  const cert = join(dir, 'ca.pem')
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert, '-days', '2',
    '-subj', '/CN=bench squid-bump CA', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], { stdio: 'ignore' })
  const certgen = CERTGEN
  const db = join(dir, 'ssl_db')
  execFileSync(certgen, ['-c', '-s', db, '-M', '16MB'], { stdio: 'ignore' })
  // squid drops to the `proxy` user for its helpers when started as root.
  const proxyUid = Number(execFileSync('id', ['-u', 'proxy']).toString().trim())
  const proxyGid = Number(execFileSync('id', ['-g', 'proxy']).toString().trim())
  execFileSync('chown', ['-R', `${proxyUid}:${proxyGid}`, dir])
  chownSync(tmp, proxyUid, proxyGid)
  const conf = join(tmp, 'squid-bump.conf')
  writeFileSync(conf, [
    `http_port 127.0.0.1:${port} ssl-bump tls-cert=${cert} tls-key=${key} generate-host-certificates=on dynamic_cert_mem_cache_size=16MB`,
    `sslcrtd_program ${certgen} -s ${db} -M 16MB`,
    'sslcrtd_children 4 startup=1 idle=1',
    `tls_outgoing_options cafile=${upCaFile}`,
    'acl step1 at_step SslBump1',
    'ssl_bump peek step1',
    'ssl_bump bump all',
    'acl CONNECT method CONNECT',
    'acl post method POST',
    'acl get method GET',
    'acl messages urlpath_regex ^/(v1/messages|mcp)$',
    'acl streams urlpath_regex ^/v1/(stream|hold|ws)$',
    // Protocol names are matched as the client spells them (`ws` sends `websocket`).
    'http_upgrade_request_protocols websocket allow all',
    'http_upgrade_request_protocols WebSocket allow all',
    'http_access allow CONNECT',
    'http_access allow post messages',
    'http_access allow get streams',
    'http_access deny all',
    ...SQUID_COMMON(tmp, 'squid-bump'),
  ].join('\n') + '\n')
  const squid = spawn('squid', ['-N', '-f', conf], { stdio: ['ignore', 'ignore', 'pipe'] })
  let err = ''
  squid.stderr!.on('data', (c) => (err += String(c)))
  children.push(squid)
  try {
    await waitPort(port)
  } catch (e) {
    throw new Error(`squid ssl-bump did not start: ${(e as Error).message}\n${err}`)
  }
  return { name: 'squid-bump', port, pid: squid.pid!, caPem: readFileSync(cert, 'utf8') }
}

export async function startMitmproxy(tmp: string, upCaFile: string, children: ChildProcess[]): Promise<Peer> {
  const port = await freePort()
  const confdir = join(tmp, 'mitm')
  const mitm = spawn('mitmdump', ['-q', '--listen-host', '127.0.0.1', '--listen-port', String(port), '--set', `confdir=${confdir}`, '--set', `ssl_verify_upstream_trusted_ca=${upCaFile}`], { stdio: 'ignore' })
  children.push(mitm)
  await waitPort(port)
  return { name: 'mitmproxy', port, pid: mitm.pid!, caPem: readFileSync(join(confdir, 'mitmproxy-ca-cert.pem'), 'utf8') }
}
