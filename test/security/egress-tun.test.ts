// The tun device inside a bubblewrap workspace (docs/security.md "Transparent egress"): the egress
// setup opens /dev/net/tun as root for the UDP reports, and after that no process of the agent's
// may open it again — not by its path, not by another path to the same node, and not by reopening
// a descriptor some process in the sandbox holds through /proc/<pid>/fd (which opens the device
// anew). Before, the init (the agent's uid) held the descriptor and the agent reopened it through
// /proc/<init>/fd. Transparent egress keeps working: a UDP lookup and a TCP connection reach the
// proxy with their rows, and a UDP datagram is still reported.
import { mkdtemp, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { tmpdir } from 'node:os'
import { statSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startHarness, type Harness } from '../proxy/harness.js'
import { startNamedUpstreams, type NamedUpstreams } from '../proxy/transparent-harness.js'
import { bwrapAvailable, runtimeBehind } from '../runtime/helpers.js'

const available = (await bwrapAvailable()) && process.getuid?.() === 0

const caps = (https: number) => `
- name: allowed-api
  type: http
  allow:
    - domains: ["api.allowed.dev:${https}"]
      methods: [GET]
      allow_private: ["127.0.0.0/8"]
`

// Every way the agent could name the device: its path, whatever mount of a tun node the mount
// table shows, every character device 10:200 under the directories it can walk, and every
// descriptor of every process in the sandbox whose target is one (opened through /proc/<pid>/fd).
// Prints one JSON object: what opened, and what each way met.
const PROBE = String.raw`
import json, os, stat
opened, seen = [], {}
def is_tun(path):
  try:
    st = os.stat(path)
  except OSError as e:
    return False
  return stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 10 and os.minor(st.st_rdev) == 200
def attempt(path, why):
  try:
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
  except OSError as e:
    seen[path] = why + ': ' + (e.strerror or str(e))
    return
  st = os.fstat(fd)
  os.close(fd)
  if stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 10 and os.minor(st.st_rdev) == 200:
    opened.append(path + ' (' + why + ')')
attempt('/dev/net/tun', 'path')
for line in open('/proc/self/mountinfo'):
  f = line.split()
  if f[3].endswith('/net/tun'):
    attempt(f[4], 'mount')
for top in ['/dev', '/run', '/tmp', '/data', '/etc', '/packs']:
  for d, dirs, files in os.walk(top, onerror=lambda e: seen.setdefault(e.filename, 'walk: ' + e.strerror)):
    for n in files:
      p = os.path.join(d, n)
      if is_tun(p):
        attempt(p, 'walk')
for pid in [p for p in os.listdir('/proc') if p.isdigit()]:
  for sub in ['/proc/%s/fd' % pid] + ['/proc/%s/task/%s/fd' % (pid, t) for t in (os.listdir('/proc/%s/task' % pid) if os.access('/proc/%s/task' % pid, os.R_OK) else [])]:
    try:
      fds = os.listdir(sub)
    except OSError as e:
      seen[sub] = 'list: ' + e.strerror
      continue
    for fd in fds:
      link = sub + '/' + fd
      try:
        target = os.readlink(link)
      except OSError:
        continue
      if target.startswith('/') and is_tun(link):
        attempt(link, 'descriptor')
      elif 'tun' in target:
        seen[link] = 'target: ' + target
print(json.dumps({'uid': os.getuid(), 'opened': opened, 'seen': seen}))
`

const SCRIPT = String.raw`
unset HTTPS_PROXY https_proxy HTTP_PROXY http_proxy
cd /data
python3 -c "$PROBE" > probe.json 2> probe.err
{ ls -a /dev/net 2>&1; ls -la /dev 2>&1; } > ls.txt
exec 3<>/dev/net/tun && echo opened > shell.txt || echo refused > shell.txt
dig +short +time=3 +tries=1 api.allowed.dev > dig.txt 2>&1
curl -sS --max-time 10 https://api.allowed.dev:$HTTPS_PORT/after-probe > curl.txt 2>&1
python3 -c "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('198.51.100.9', 7777))"
python3 -c "$PROBE" > probe-after.json 2>> probe.err
`

describe.skipIf(!available)('the tun device inside a bubblewrap workspace', () => {
  let h: Harness
  let up: NamedUpstreams
  let sandboxes: Awaited<ReturnType<typeof runtimeBehind>>
  const tunBefore = statSync('/dev/net/tun', { throwIfNoEntry: false })

  beforeAll(async () => {
    up = await startNamedUpstreams(await mkdtemp(join(tmpdir(), 'corral-named-')))
    h = await startHarness({ resolve: async () => [{ address: '127.0.0.1', family: 4 }], upstreamCaPem: [up.caPem] })
    sandboxes = await runtimeBehind(h, 'test-devnet-')
  })
  afterAll(async () => {
    await sandboxes?.close()
    await h?.close()
    await up?.close()
  })

  it('no process of the agent can open it, by any path or descriptor; UDP and TCP still reach the proxy', async () => {
    const w = await h.workspace(caps(up.httpsPort), 'idle', { raw: true })
    const { runtime } = sandboxes
    const ws = await runtime.provision({ workspaceId: w.workspaceId })
    const agent = await runtime.startAgent(w.workspaceId, { command: ['/bin/bash', '-c', SCRIPT], proxyToken: w.token, env: { PROBE, HTTPS_PORT: String(up.httpsPort) } })
    expect(await agent.exited).toEqual({ code: 0, signal: null })
    const out = async (f: string) => (await readFile(join(ws.dataDir, f), 'utf8')).trim()
    expect(await out('probe.err')).toBe('')

    for (const file of ['probe.json', 'probe-after.json']) {
      const probe = JSON.parse(await out(file)) as { uid: number; opened: string[]; seen: Record<string, string> }
      expect(probe.uid).not.toBe(0)
      expect(probe.opened, JSON.stringify(probe.seen)).toEqual([])
      // The path itself was tried and refused.
      expect(probe.seen['/dev/net/tun']).toMatch(/: (Permission denied|No such file or directory)$/)
    }
    // A shell's open and a listing show no tun either.
    expect(await out('shell.txt')).toBe('refused')
    expect(await out('ls.txt')).not.toMatch(/\btun\b/)

    // Transparent egress is unchanged: the UDP lookup and the TCP connection reached the proxy,
    // each with its row, and the datagram was reported.
    expect(await out('dig.txt')).toMatch(/^100\.\d+\.\d+\.\d+$/)
    expect(await out('curl.txt')).toBe('hello api.allowed.dev')
    const rows = () => h.audit.decisions().filter((r) => r.workspace_id === w.workspaceId)
    for (let i = 0; i < 100 && !rows().some((r) => r.detail?.protocol === 'udp'); i++) await sleep(50)
    expect(rows().filter((r) => r.policy_type === 'dns' && r.destination === 'api.allowed.dev')).not.toEqual([])
    expect(rows().filter((r) => r.policy_type === 'http' && r.path === '/after-probe')).toEqual([expect.objectContaining({ decision: 'allow', destination: 'api.allowed.dev' })])
    expect(rows().filter((r) => r.detail?.protocol === 'udp')).toEqual([expect.objectContaining({ decision: 'deny', destination: '198.51.100.9', detail: expect.objectContaining({ port: 7777 }) })])
  })

  it('the host keeps its own device node', () => {
    const after = statSync('/dev/net/tun', { throwIfNoEntry: false })
    expect(after?.rdev).toBe(tunBefore?.rdev)
    expect(after?.isCharacterDevice()).toBe(tunBefore?.isCharacterDevice())
  })
})
