// bench:proxy's transparent mode: the same POST workload without HTTPS_PROXY. The load generator
// (bench/transparent-generator.ts) runs in a network namespace of its own set up exactly as the
// bubblewrap runtime sets up a workspace's (src/runtime/egress.ts: every address local, nftables'
// TPROXY to one listener, the resolver at 127.0.0.53; the sandbox init of sandbox-init.ts relaying
// each connection to the proxy over a unix socket and the host's ProxyBridge). Started as root with
// bwrap, the host's file system shared (--dev-bind / /) so the generator runs from this checkout;
// /dev is the sandbox's own (--dev), as in the runtime, so nothing the egress script does to its
// /dev reaches the host's device nodes.
// Also runs bench/resolver.ts (the resolver's queries/s through the proxy and alone) and folds its
// two figures in.
import { spawn } from 'node:child_process'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { ProxyBridge } from '../src/runtime/proxy-bridge.js'
import { SANDBOX_EGRESS_DIR, egressCommand, writeEgressFiles } from '../src/runtime/egress.js'
import { SANDBOX_INIT_SOURCE } from '../src/runtime/sandbox-init.js'
import { ROOT } from './proxy-setup.js'
import type { GeneratorConfig } from './transparent-generator.js'

const BRIDGE_PORT = 3128

export interface TransparentRun {
  synthetic_address: string
  lookup: { rate: number; seconds: number; stub: Record<string, number>; corral: Record<string, number> }
  connect: Record<string, number | null>
  transparent: Record<string, number | null>
}

export async function measureTransparent(o: { tmp: string; proxyUrl: string; corralPid: number; token: string; caPem: string; upPort: number; seconds: number; rate: number; rateSeconds: number }): Promise<TransparentRun> {
  const dir = join(o.tmp, 'transparent')
  mkdirSync(dir, { recursive: true })
  const egress = await writeEgressFiles(dir)
  const proxy = new URL(o.proxyUrl)
  const bridge = await ProxyBridge.open(join(dir, 'bridge.sock'), { host: proxy.hostname, port: Number(proxy.port) })
  try {
    writeFileSync(join(dir, 'init.mjs'), SANDBOX_INIT_SOURCE)
    writeFileSync(join(dir, 'ca.pem'), o.caPem)
    const cfg: GeneratorConfig = {
      out: join(dir, 'result.json'), caFile: join(dir, 'ca.pem'), token: o.token, corralPid: o.corralPid, upPort: o.upPort,
      bridgePort: BRIDGE_PORT, seconds: o.seconds, rate: o.rate, rateSeconds: o.rateSeconds,
    }
    const inner = [process.execPath, join(dir, 'init.mjs'), process.execPath, '--import', 'tsx', join(ROOT, 'bench/transparent-generator.ts'), JSON.stringify(cfg)]
    const args = ['--dev-bind', '/', '/', '--dev', '/dev', '--dev-bind-try', '/dev/net/tun', '/dev/net/tun', '--tmpfs', '/run', '--ro-bind', egress.dir, SANDBOX_EGRESS_DIR, '--unshare-net', '--die-with-parent',
      '--cap-drop', 'ALL', '--cap-add', 'CAP_NET_ADMIN', '--cap-add', 'CAP_NET_BIND_SERVICE', '--cap-add', 'CAP_SETUID', '--cap-add', 'CAP_SETGID', '--chdir', ROOT, '--', ...egressCommand(inner)]
    // stdin stays open: the init stops its agent when stdin closes.
    const child = spawn('bwrap', args, {
      env: { ...process.env, CORRAL_BRIDGE_SOCKET: bridge.socketPath, CORRAL_BRIDGE_PORT: String(BRIDGE_PORT), CORRAL_PROXY_TOKEN: o.token },
      stdio: ['pipe', 'inherit', 'inherit'],
    })
    const code = await new Promise<number | null>((r) => child.once('exit', r))
    if (code !== 0) throw new Error(`the transparent generator exited ${code}`)
    return JSON.parse(readFileSync(cfg.out, 'utf8')) as TransparentRun
  } finally {
    await bridge.close()
  }
}

/** bench/resolver.ts in its own process: queries/s through the proxy (DNS over TCP, rows written) and of the resolver alone. */
export async function resolverFigures(seconds: number): Promise<Record<string, number>> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'bench/resolver.ts')], { cwd: ROOT, env: { ...process.env, CORRAL_BENCH_SECONDS: String(seconds) }, stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (c: Buffer) => (out += String(c)))
  await new Promise((r) => child.once('exit', r))
  const through = /(\d+) queries\/s, p50 ([\d.]+) ms, p99 ([\d.]+) ms/.exec(out)
  const alone = /resolver alone: (\d+) queries\/s/.exec(out)
  if (!through || !alone) throw new Error(`bench/resolver.ts printed:\n${out}`)
  return { proxy_qps: Number(through[1]), proxy_p50_ms: Number(through[2]), proxy_p99_ms: Number(through[3]), alone_qps: Number(alone[1]) }
}
