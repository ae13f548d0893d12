// A git smart-HTTP server over HTTPS on loopback: `git http-backend` as a CGI behind a node HTTPS
// server whose leaf certificates are minted per SNI from its own CA (any name resolves to it).
import { spawn, execFileSync } from 'node:child_process'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { createServer, type Server } from 'node:https'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/ca.js'

export interface GitServer {
  port: number
  caPem: string
  close(): Promise<void>
}

/**
 * Serves one bare repository `repo.git` holding a commit with README.md = `content`, its leaves
 * from the CA kept in `caDir` (share one with the suite's other upstreams: two test CAs carry the
 * same subject, and a trust list holding both fails verification).
 */
export async function startGitServer(content: string, caDir: string): Promise<GitServer> {
  const dir = await mkdtemp(join(tmpdir(), 'corral-git-'))
  const work = join(dir, 'work')
  const git = (args: string[], cwd = dir) => execFileSync('git', args, { cwd, env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t' } })
  git(['init', '-q', '-b', 'main', work])
  await writeFile(join(work, 'README.md'), content)
  git(['add', 'README.md'], work)
  git(['commit', '-q', '-m', 'first'], work)
  git(['clone', '-q', '--bare', work, join(dir, 'repo.git')])
  const ca = await loadOrCreateCa(caDir)
  const minter = new LeafMinter(ca)
  const backend = join(execFileSync('git', ['--exec-path']).toString().trim(), 'git-http-backend')
  const server: Server = createServer({
    ...(await minter.pemFor('127.0.0.1')),
    SNICallback: (name, cb) => { minter.contextFor(name).then((c) => cb(null, c), (e: Error) => cb(e)) },
  }, (req, res) => {
    const url = new URL(req.url ?? '/', 'https://x')
    const cgi = spawn(backend, [], {
      env: {
        GIT_PROJECT_ROOT: dir, GIT_HTTP_EXPORT_ALL: '1', PATH_INFO: url.pathname, QUERY_STRING: url.search.slice(1),
        REQUEST_METHOD: req.method ?? 'GET', CONTENT_TYPE: String(req.headers['content-type'] ?? ''), REMOTE_ADDR: '127.0.0.1',
        ...(req.headers['git-protocol'] ? { GIT_PROTOCOL: String(req.headers['git-protocol']) } : {}),
      },
    })
    req.pipe(cgi.stdin)
    let head = Buffer.alloc(0)
    let started = false
    cgi.stdout.on('data', (chunk: Buffer) => {
      if (started) return void res.write(chunk)
      head = Buffer.concat([head, chunk])
      const end = head.indexOf('\r\n\r\n')
      if (end < 0) return
      started = true
      let status = 200
      for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
        const i = line.indexOf(':')
        const k = line.slice(0, i).trim()
        const v = line.slice(i + 1).trim()
        if (k.toLowerCase() === 'status') status = Number(v.split(' ')[0])
        else res.setHeader(k, v)
      }
      res.writeHead(status)
      res.write(head.subarray(end + 4))
    })
    cgi.on('close', () => res.end())
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    port: (server.address() as AddressInfo).port,
    caPem: ca.certPem,
    async close() {
      server.closeAllConnections()
      await new Promise((r) => server.close(r))
    },
  }
}
