// The program run inside a sandbox by the isolation tests: it tries every way out and records what
// happened to /data/probe.json. Kept as CommonJS text for `node -e`, which needs no file inside.
export const PROBE_SCRIPT = String.raw`
const fs = require('node:fs'), net = require('node:net'), dns = require('node:dns'), http = require('node:http'), os = require('node:os')
const targetPort = Number(process.env.PROBE_TARGET_PORT)
const hostAddress = process.env.PROBE_HOST_ADDRESS
const tryConnect = (host, port) => new Promise((resolve) => {
  const s = net.connect({ host, port, timeout: 3000 })
  s.on('connect', () => { s.destroy(); resolve('connected') })
  s.on('timeout', () => { s.destroy(); resolve('timeout') })
  s.on('error', (e) => resolve(e.code || e.message))
})
const tryWrite = (path) => { try { fs.writeFileSync(path, 'x'); return 'written' } catch (e) { return e.code } }
const tryRead = (path) => { try { fs.readFileSync(path); return 'read' } catch (e) { return e.code } }
const viaProxy = () => new Promise((resolve) => {
  const proxy = new URL(process.env.HTTP_PROXY)
  const req = http.request({ host: proxy.hostname, port: proxy.port, method: 'GET', path: 'http://127.0.0.1:' + targetPort + '/through-proxy',
    headers: { 'proxy-authorization': 'Bearer ' + process.env.CORRAL_PROXY_TOKEN } }, (res) => {
    let body = ''; res.setEncoding('utf8'); res.on('data', (d) => body += d); res.on('end', () => resolve({ status: res.statusCode, body }))
  })
  req.on('error', (e) => resolve({ error: e.code || e.message }))
  req.end()
})
;(async () => {
  const out = {
    uid: process.getuid(), gid: process.getgid(), pid: process.pid,
    pids: fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n)).length,
    interfaces: Object.keys(os.networkInterfaces()),
    directLoopback: await tryConnect('127.0.0.1', targetPort),
    directHost: hostAddress ? await tryConnect(hostAddress, targetPort) : 'no-host-address',
    dns: await new Promise((r) => dns.lookup('example.com', (e, a) => r(e ? e.code : a))),
    writeData: tryWrite('/data/written-inside.txt'),
    writeUsr: tryWrite('/usr/corral-escape'),
    writeEtc: tryWrite('/etc/corral-escape'),
    writeRepo: tryWrite(process.env.PROBE_REPO_FILE),
    readShadow: tryRead('/etc/shadow'),
    readRuntimeRoot: tryRead(process.env.PROBE_OTHER_WORKSPACE_FILE),
    nestedUserns: require('node:child_process').spawnSync('unshare', ['--user', 'true']).status,
    env: { token: process.env.CORRAL_PROXY_TOKEN, bridgeSocketHidden: process.env.CORRAL_BRIDGE_SOCKET === undefined,
      proxy: process.env.HTTPS_PROXY, ca: process.env.NODE_EXTRA_CA_CERTS, cwd: process.cwd() },
    viaProxy: await viaProxy(),
  }
  fs.writeFileSync('/data/probe.json', JSON.stringify(out))
})()
`
