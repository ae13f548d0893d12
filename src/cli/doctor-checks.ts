// The checks of `corral doctor`: can this machine run `corral serve`? Each check answers ok, warn
// (works, with a caveat) or fail, and every non-ok answer names its fix. Nothing here creates
// anything: a missing store or CA is reported (serve creates them on first start), never made.
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createServer } from 'node:net'
import { join, resolve } from 'node:path'
import type * as StoreFace from '../store/index.js'

export interface Check {
  check: string
  status: 'ok' | 'warn' | 'fail'
  detail: string
  fix?: string
}

export interface DoctorOptions {
  dataDir: string
  db?: string
  port: number
  proxyPort: number
  env: NodeJS.ProcessEnv
}

export function nodeCheck(version = process.versions.node): Check {
  const [major, minor] = version.split('.').map(Number)
  const ok = (major === 20 && minor >= 19) || (major === 22 && minor >= 12) || major > 22
  return ok
    ? { check: 'node', status: 'ok', detail: `Node ${version}` }
    : { check: 'node', status: 'fail', detail: `Node ${version} is not supported (>= 20.19 < 21, or >= 22.12)`, fix: 'install Node 22 LTS (or 20.19+), e.g. from nodejs.org or your package manager' }
}

export function bwrapCheck(): Promise<Check> {
  return new Promise((done) => {
    execFile('bwrap', ['--ro-bind', '/', '/', '--unshare-all', '--die-with-parent', 'true'], { timeout: 10_000 }, (error, _out, stderr) => {
      if (!error) return done({ check: 'bubblewrap', status: 'ok', detail: 'bwrap runs a sandbox here (--runtime local)' })
      const missing = (error as NodeJS.ErrnoException).code === 'ENOENT'
      done({
        check: 'bubblewrap',
        status: 'fail',
        detail: missing ? 'bwrap is not installed' : `bwrap cannot create a sandbox: ${String(stderr).trim().split('\n')[0] || error.message}`,
        fix: missing
          ? 'apt-get install bubblewrap (or dnf install bubblewrap); or run serve --runtime process (no sandbox, development only)'
          : 'allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu 24.04 kernel.apparmor_restrict_unprivileged_userns=0); or serve --runtime process (no sandbox)',
      })
    })
  })
}

export function portCheck(name: string, port: number, flag: string): Promise<Check> {
  return new Promise((done) => {
    const server = createServer()
    server.once('error', (error: NodeJS.ErrnoException) => {
      done({
        check: name,
        status: 'fail',
        detail: `127.0.0.1:${port} is not free (${error.code ?? error.message})`,
        fix: `another process listens there (a running serve? curl http://127.0.0.1:${port}/healthz); stop it or pass ${flag} <port>`,
      })
    })
    server.listen(port, '127.0.0.1', () => server.close(() => done({ check: name, status: 'ok', detail: `127.0.0.1:${port} is free` })))
  })
}

/** What the database check asks the store (handed in: the store's face is loaded at run time). */
export type StoreProbe = Pick<typeof StoreFace, 'openStore' | 'defaultStoreUrl' | 'storeFiles' | 'storeUrlDialect'>

export async function databaseCheck(o: DoctorOptions, store: StoreProbe): Promise<Check> {
  const url = o.db ?? store.defaultStoreUrl(o.dataDir)
  const shown = url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@')
  const file = store.storeFiles(url)[0]
  if (file !== undefined && !existsSync(file)) {
    return { check: 'database', status: 'warn', detail: `no store yet at ${shown}`, fix: 'serve creates it on first start (or pass --data-dir / --db to check an existing one)' }
  }
  try {
    const opened = await store.openStore(url)
    await opened.close()
    return { check: 'database', status: 'ok', detail: `${shown} opens` }
  } catch (error) {
    return {
      check: 'database',
      status: 'fail',
      detail: `${shown}: ${(error as Error).message.split('\n')[0]}`,
      fix: store.storeUrlDialect(url) === 'postgres' ? 'check the URL, that PostgreSQL runs and accepts this user (psql "<url>" -c "select 1")' : 'check the path and its permissions, or pass --db',
    }
  }
}

export function caCheck(dataDir: string): Check {
  const dir = resolve(dataDir)
  // The file name of src/proxy/ca.ts's caCertPath (the cli does not load the proxy).
  return existsSync(join(dir, 'ca.pem'))
    ? { check: 'ca', status: 'ok', detail: `proxy CA at ${join(dir, 'ca.pem')}` }
    : { check: 'ca', status: 'warn', detail: `no proxy CA in ${dir} yet`, fix: 'serve creates it on first start; `corral ca export` then prints it for clients to trust' }
}

export async function registryCheck(env: NodeJS.ProcessEnv): Promise<Check> {
  const raw = env.CORRAL_PACK_REGISTRY?.trim()
  if (!raw) return { check: 'registry', status: 'ok', detail: 'no pack registry configured (optional: CORRAL_PACK_REGISTRY)' }
  const host = raw.split('/')[0]
  const insecure = (env.CORRAL_REGISTRY_INSECURE ?? '').split(',').map((s) => s.trim()).includes(host) || /^(127\.|localhost|\[::1\])/.test(host)
  const url = `${insecure ? 'http' : 'https'}://${host}/v2/`
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(5000) })
    await res.body?.cancel()
    if (res.status === 200 || res.status === 401) return { check: 'registry', status: 'ok', detail: `${url} answers (${res.status})` }
    return { check: 'registry', status: 'fail', detail: `${url} answered ${res.status}, not an OCI registry`, fix: 'check CORRAL_PACK_REGISTRY (host[:port][/namespace])' }
  } catch (error) {
    return { check: 'registry', status: 'fail', detail: `${url}: ${(error as Error).message}`, fix: 'start the registry or fix CORRAL_PACK_REGISTRY; a plain-HTTP registry goes in CORRAL_REGISTRY_INSECURE' }
  }
}
