import { spawn } from 'node:child_process'
import { Args, Flags } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { resolveCredential, type CredentialMeta } from '../../cli/credential-output.js'
import { CliError, UsageError } from '../../cli/errors.js'
import { Progress } from '../../cli/progress.js'

interface Authorized { credential: CredentialMeta; auth_url: string; waited: boolean }

export default class CredentialAuthorize extends ApiCommand<Authorized> {
  static override summary = 'Complete (or redo) OAuth consent for a credential of kind oauth.'
  static override description =
    'Starts consent (POST /v1/credentials/{id}/oauth/start), prints the provider\'s authorize URL and opens it in a browser when one is available (BROWSER, a desktop session, or macOS), then waits until the credential is authorized (active). The consent expires after 10 minutes. `serve` needs --public-url for this (docs/credentials.md "OAuth credentials").'
  static override examples = ['<%= config.bin %> credential authorize gmail', '<%= config.bin %> credential authorize gmail --no-browser --no-wait --json']
  static override args = { credential: Args.string({ required: true, description: 'Credential name or id.' }) }
  static override flags = {
    browser: Flags.boolean({ summary: 'Open the authorize URL in a browser when one is available.', default: true, allowNo: true }),
    wait: Flags.boolean({ summary: 'Wait until consent completes (the credential becomes active).', default: true, allowNo: true }),
    timeout: Flags.integer({ summary: 'Seconds to wait for consent.', default: 600, min: 1, max: 3600 }),
  }

  async execute(): Promise<Authorized> {
    const { args, flags } = await this.parse(CredentialAuthorize)
    const before = await resolveCredential(this.client, args.credential)
    if (before.kind !== 'oauth') throw new UsageError(`${before.name} is a ${before.kind} credential; only kind oauth has a consent flow`)
    const { auth_url } = await this.client.request<{ auth_url: string }>('POST', `/credentials/${encodeURIComponent(before.id)}/oauth/start`)
    process.stderr.write(`Open this URL in a browser and consent:\n  ${auth_url}\n`)
    if (flags.browser) openBrowser(auth_url)
    if (!flags.wait) return { credential: before, auth_url, waited: false }
    const progress = new Progress()
    const end = Date.now() + flags.timeout * 1000
    for (;;) {
      const now = await this.client.request<CredentialMeta>('GET', `/credentials/${encodeURIComponent(before.id)}`)
      // Every completed consent touches the record, so a re-consent of an active credential shows too.
      if (now.status === 'active' && now.updated_at !== before.updated_at) {
        progress.done(`Credential ${now.name} is authorized (active).`)
        return { credential: now, auth_url, waited: true }
      }
      if (Date.now() > end) {
        progress.clear()
        throw new CliError(`timed out after ${flags.timeout}s waiting for consent on ${before.name} (status ${now.status}); run \`corral credential authorize ${before.name}\` again`)
      }
      progress.update(`waiting for consent on ${before.name} (status ${now.status})`)
      await new Promise((r) => setTimeout(r, 1000))
    }
  }

  protected override render(r: Authorized): void {
    if (!r.waited) process.stdout.write(`${r.auth_url}\n`)
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
