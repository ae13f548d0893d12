// The web console (src/console/, built by `npm run build` into dist/console/) served at `/` by the
// same Fastify app as /v1: one origin, so the console calls the public API with its Bearer token
// and needs no CORS and no cookies. Only the files the build produced are routes (no wildcard: an
// unknown path is the API's 404 envelope, and nothing outside dist/console can be named). Every
// console response carries a strict Content-Security-Policy: scripts, styles and connections from
// this origin only — no inline script or style, no eval, no framing (docs/console.md "Security").
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import fastifyStatic from '@fastify/static'
import type { FastifyInstance } from 'fastify'
import { builtFile } from '../proc/index.js'
import { sendError } from './edge.js'

/** dist/console/ of this install: two levels up from both src/server/ and dist/server/, beside dist/bundle/. */
export const CONSOLE_DIR = fileURLToPath(builtFile(import.meta.url, '../../dist/console/', '../console/'))

export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ')

const CONSOLE_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': CONSOLE_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
}

/**
 * Registers the console's files under `/` (index.html at `/`). Without a build (a source checkout
 * that has not run `npm run build`) `GET /` answers the 404 envelope saying so.
 */
export async function consoleRoutes(app: FastifyInstance, dir: string = CONSOLE_DIR): Promise<void> {
  if (!existsSync(`${dir}/index.html`)) {
    app.get('/', { config: { auth: false } }, (request, reply) =>
      sendError(reply, request, 404, 'not_found', 'the web console is not built into this install; run `npm run build`'),
    )
    return
  }
  await app.register(fastifyStatic, {
    root: dir,
    prefix: '/',
    wildcard: false,
    index: 'index.html',
    decorateReply: false,
    serveDotFiles: false,
    setHeaders(res, path) {
      for (const [name, value] of Object.entries(CONSOLE_HEADERS)) res.setHeader(name, value)
      // Hashed asset names never change content; the page itself is revalidated every time.
      res.setHeader('cache-control', /\/assets\//.test(path) ? 'public, max-age=31536000, immutable' : 'no-cache')
    },
  })
}
