import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { RuntimeError } from './errors.js'

// Where a runtime keeps things on the host:
//   <root>/workspaces/<id>/data         mounted as /data
//   <root>/workspaces/<id>/logs/agent.log
//   <root>/workspaces/<id>/snapshots/   tars + manifest.json
//   <root>/workspaces/<id>/inbox/       files handed to the agent (tasks.json), /run/corral/inbox inside
//   <root>/workspaces/<id>/stopped      marker: the workspace was stopped (its snapshot taken)
//   <root>/shared/                      init script, passwd/group, CA bundle (same for every workspace)
//   <sockets>/<id>.sock                 the proxy bridge of a running workspace

const WORKSPACE_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/
/** sun_path holds 108 bytes; keep a margin for the id. */
const MAX_SOCKET_DIR = 60

export class RuntimeLayout {
  readonly root: string
  readonly shared: string
  readonly sockets: string

  constructor(root: string) {
    this.root = root
    this.shared = join(root, 'shared')
    // Unix socket paths are short; a deep data dir falls back to a per-root directory under /tmp.
    const preferred = join(root, 'sock')
    this.sockets = preferred.length <= MAX_SOCKET_DIR
      ? preferred
      : join(tmpdir(), `corral-sock-${createHash('sha256').update(root).digest('hex').slice(0, 12)}`)
  }

  workspace(id: string): string {
    if (!WORKSPACE_ID.test(id)) throw new RuntimeError('workspace_not_found', `invalid workspace id ${JSON.stringify(id)}`)
    return join(this.root, 'workspaces', id)
  }

  data(id: string): string {
    return join(this.workspace(id), 'data')
  }

  logs(id: string): string {
    return join(this.workspace(id), 'logs', 'agent.log')
  }

  snapshots(id: string): string {
    return join(this.workspace(id), 'snapshots')
  }

  /** Files handed to the agent for one start (read-only inside, never snapshotted). */
  inbox(id: string): string {
    return join(this.workspace(id), 'inbox')
  }

  stoppedMarker(id: string): string {
    return join(this.workspace(id), 'stopped')
  }

  socket(id: string): string {
    this.workspace(id)
    return join(this.sockets, `${id}.sock`)
  }
}

/** The installed corral package (the folder holding its package.json), from src/ or dist/ alike. */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (;;) {
    const manifest = join(dir, 'package.json')
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'corral') return dir
    const parent = dirname(dir)
    if (parent === dir) throw new Error('cannot locate the corral package root')
    dir = parent
  }
}

/**
 * argv that runs the reference agent (the lean entry behind `corral agent`, without the CLI
 * framework) with the same build the caller runs: dist/agent/main.js when corral runs from dist/,
 * the TypeScript source through tsx when it runs from sources (tests, bin/dev.js).
 */
export function defaultAgentCommand(): string[] {
  const root = packageRoot()
  const fromDist = fileURLToPath(import.meta.url).includes(`${join(root, 'dist')}/`)
  return fromDist
    ? [process.execPath, join(root, 'dist', 'agent', 'main.js')]
    // tsx by absolute URL: inside the sandbox the cwd is /data, where a bare 'tsx' would not resolve.
    : [process.execPath, '--import', import.meta.resolve('tsx'), join(root, 'src', 'agent', 'main.ts')]
}

/** `http://corral:<token>@host:port`: the proxy URL as generic HTTP clients carry credentials. */
export function proxyUrlWithToken(proxyUrl: string, token: string): string {
  const url = new URL(proxyUrl)
  url.username = 'corral'
  url.password = token
  return url.toString().replace(/\/$/, '')
}

/**
 * The agent's proxy variables on the directory runtimes: every spelling tools read, each with the
 * token as userinfo (curl, pip, git and Python requests send it as `Proxy-Authorization: Basic`,
 * which the proxy accepts with the token as password), and no exceptions.
 */
export function proxyEnv(proxyUrl: string, token: string): Record<string, string> {
  const withToken = proxyUrlWithToken(proxyUrl, token)
  return { HTTPS_PROXY: withToken, HTTP_PROXY: withToken, https_proxy: withToken, http_proxy: withToken, NO_PROXY: '', no_proxy: '' }
}

/** The variables that make node and the usual tools trust corral's CA (`ca`) or the bundle with it (`caBundle`). */
export function caEnv(ca: string | null | undefined, caBundle: string | null | undefined): Record<string, string> {
  return {
    ...(ca ? { NODE_EXTRA_CA_CERTS: ca, CORRAL_CA_FILE: ca } : {}),
    ...(caBundle ? { SSL_CERT_FILE: caBundle, CURL_CA_BUNDLE: caBundle, REQUESTS_CA_BUNDLE: caBundle, GIT_SSL_CAINFO: caBundle } : {}),
  }
}
