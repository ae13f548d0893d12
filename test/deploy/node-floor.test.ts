// corral supports Node 20.19+ (package.json engines) while cookie@2 declares Node >= 22
// (docs/reliability.md "Node 20 and cookie@2"). cookie@2 is pure ESM with no newer API; corral
// imports it, and fastify's light-my-request (inject) require()s it, which works on Node 20 only
// through require(esm), on by default since 20.19 — corral's floor. These load it both ways on the
// running Node and check the values a cookie carries survive the round trip.
import { createRequire } from 'node:module'
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import Fastify from 'fastify'
import { parseCookie, stringifySetCookie } from 'cookie'
import { describe, expect, it } from 'vitest'

const ROOT = resolve(import.meta.dirname, '../..')

describe('cookie@2 on the Node versions corral supports', () => {
  it('is the one production package whose declared Node range is above corral\'s floor, and the lock says which', () => {
    const lock = JSON.parse(readFileSync(resolve(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string; dev?: boolean; engines?: { node?: string } }> }
    const above = Object.entries(lock.packages)
      .filter(([path, p]) => path && !p.dev && /^>=\s*2[1-9]/.test(p.engines?.node ?? ''))
      .map(([path, p]) => `${path.replace(/^.*node_modules\//, '')}@${p.version} ${p.engines!.node}`)
    expect(above).toEqual(['cookie@2.0.2 >=22'])
  })

  it('loads through import and through require (as light-my-request does) on this Node', () => {
    const fromLightMyRequest = createRequire(createRequire(resolve(ROOT, 'package.json')).resolve('light-my-request'))
    const required = fromLightMyRequest('cookie') as { stringifySetCookie: typeof stringifySetCookie; parseCookie: typeof parseCookie }
    expect(required.stringifySetCookie).toBe(stringifySetCookie)
    const header = required.stringifySetCookie({ name: 'corral_state', value: 'a b;c', httpOnly: true, sameSite: 'lax', path: '/v1/oauth' })
    expect(header).toMatch(/^corral_state=a%20b%3Bc; Path=\/v1\/oauth; HttpOnly; SameSite=Lax$/)
    expect(parseCookie(header.split(';')[0]!)).toEqual({ corral_state: 'a b;c' })
  })

  it("fastify's inject sends cookies through it", async () => {
    const app = Fastify()
    app.get('/', async (request) => parseCookie(request.headers.cookie ?? ''))
    try {
      const res = await app.inject({ method: 'GET', url: '/', cookies: { state: 's1', nonce: 'n 2' } })
      expect(res.json()).toEqual({ state: 's1', nonce: 'n 2' })
    } finally {
      await app.close()
    }
  })
})
