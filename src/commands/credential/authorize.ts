import { spawn } from 'node:child_process'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Args, Flags } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { resolveCredential, type CredentialMeta } from '../../cli/credential-output.js'
import { CliError, UsageError } from '../../cli/errors.js'
import { Progress } from '../../cli/progress.js'

interface Authorized { credential: CredentialMeta; auth_url: string }
interface Started { auth_url: string; binding: string }

export default class CredentialAuthorize extends ApiCommand<Authorized> {
  static override summary = 'Complete (or redo) OAuth consent for a credential of kind oauth.'
  static override description =
    'Starts consent (POST /v1/credentials/{id}/oauth/start) bound to this command: it listens on a loopback port, prints the provider\'s authorize URL and opens it in a browser when one is available (BROWSER, a desktop session, or macOS). After consent, serve sends that browser back to the loopback port, and this command finishes the consent with the binding secret only it holds, so a consent started here cannot be finished in anyone else\'s browser. The browser must run on this machine (on a remote one, forward the port: ssh -L PORT:127.0.0.1:PORT with --port PORT). The consent expires after 10 minutes. `serve` needs --public-url for this (docs/credentials.md "OAuth credentials").'
  static override examples = ['<%= config.bin %> credential authorize gmail', '<%= config.bin %> credential authorize gmail --no-browser --port 8765']
  static override args = { credential: Args.string({ required: true, description: 'Credential name or id.' }) }
  static override flags = {
    browser: Flags.boolean({ summary: 'Open the authorize URL in a browser when one is available.', default: true, allowNo: true }),
    port: Flags.integer({ summary: 'Loopback port the browser comes back to (default: any free port).', default: 0, min: 0, max: 65535 }),
    timeout: Flags.integer({ summary: 'Seconds to wait for consent.', default: 600, min: 1, max: 3600 }),
  }

  async execute(): Promise<Authorized> {
    const { args, flags } = await this.parse(CredentialAuthorize)
    const before = await resolveCredential(this.client, args.credential)
    if (before.kind !== 'oauth') throw new UsageError(`${before.name} is a ${before.kind} credential; only kind oauth has a consent flow`)
    const back = new Loopback()
    try {
      const loopbackUri = await back.listen(flags.port)
      const path = `/credentials/${encodeURIComponent(before.id)}/oauth`
      const { auth_url, binding } = await this.client.request<Started>('POST', `${path}/start`, { body: { loopback_uri: loopbackUri } })
      process.stderr.write(`Open this URL in a browser on this machine and consent:\n  ${auth_url}\n`)
      if (flags.browser) openBrowser(auth_url)
      const progress = new Progress()
      progress.update(`waiting for consent on ${before.name} (the browser comes back to ${loopbackUri})`)
      const query = await back.next(flags.timeout * 1000).catch((err: unknown) => {
        progress.clear()
        throw err instanceof TimedOut
          ? new CliError(`timed out after ${flags.timeout}s waiting for consent on ${before.name}; run \`corral credential authorize ${before.name}\` again`)
          : err
      })
      try {
        const done = await this.client.request<{ credential: CredentialMeta }>('POST', `${path}/complete`, { body: { binding, query } })
        back.answer('Authorized', `The credential ${done.credential.name} is authorized and active. You can close this window.`)
        progress.done(`Credential ${done.credential.name} is authorized (active).`)
        const now = await this.client.request<CredentialMeta>('GET', `/credentials/${encodeURIComponent(before.id)}`)
        return { credential: now, auth_url }
      } catch (err) {
        progress.clear()
        back.answer('Not authorized', `${err instanceof Error ? err.message : 'the consent failed'}. Nothing was changed; see the terminal.`)
        throw err
      }
    } finally {
      await back.close()
    }
  }
}

class TimedOut extends Error {}

/**
 * The loopback redirect target (RFC 8252 §7.3): the first request to /callback carrying a state is
 * the provider's parameters, passed on by serve's callback; the browser waits for the outcome page.
 */
class Loopback {
  readonly #server: Server = createServer((req, res) => this.#arrived(req, res))
  #waiting?: { resolve: (q: Record<string, string>) => void }
  #pending?: ServerResponse

  async listen(port: number): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', (err: NodeJS.ErrnoException) => reject(new CliError(`cannot listen on 127.0.0.1:${port} for the browser to come back (${err.code ?? err.message})`)))
      this.#server.listen(port, '127.0.0.1', resolve)
    })
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/callback`
  }

  next(timeoutMs: number): Promise<Record<string, string>> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new TimedOut()), timeoutMs)
      this.#waiting = { resolve: (q) => (clearTimeout(timer), resolve(q)) }
    })
  }

  #arrived(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1')
    if (req.method !== 'GET' || url.pathname !== '/callback' || !url.searchParams.has('state') || !this.#waiting || this.#pending) {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found\n')
      return
    }
    this.#pending = res
    const waiting = this.#waiting
    this.#waiting = undefined
    waiting.resolve(Object.fromEntries(url.searchParams))
  }

  /** The page the waiting browser sees. */
  answer(title: string, text: string): void {
    const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
    this.#pending?.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-security-policy': "default-src 'none'", 'cache-control': 'no-store' })
      .end(`<!doctype html><html><head><meta charset="utf-8"><title>corral: ${esc(title)}</title></head><body><h1>${esc(title)}</h1><p>${esc(text)}</p></body></html>\n`)
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections()
    await new Promise((r) => this.#server.close(r))
  }
}

/** The platform's opener, detached and silent; nothing happens without a browser (a server, CI). */
function openBrowser(url: string): void {
  const env = process.env
  const cmd = env.BROWSER ? env.BROWSER : process.platform === 'darwin' ? 'open' : env.DISPLAY || env.WAYLAND_DISPLAY ? 'xdg-open' : undefined
  if (!cmd) return
  try {
    const child = spawn(cmd, [url], { detached: true, stdio: 'ignore' })
    child.on('error', () => {})
    child.unref()
  } catch {
    // no browser: the URL is printed above
  }
}
