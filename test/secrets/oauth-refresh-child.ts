// One replica's minter for oauth-refresh-replicas.test.ts: a process of its own with its own store
// on the shared database. Prints `ready`, waits for `go` on stdin, asks for an access token from
// several requests at once and prints one JSON line: the tokens it got (or the error class), the
// refreshes it made. argv: <store url> <schema|->; env CORRAL_TEST_OAUTH_CHILD: JSON
// {key (hex master key), ca (PEM), orgId, credId, clientSecret}.
import { createInterface } from 'node:readline'
import { OAuthHttp, OAuthMinter, Sealer } from '../../src/secrets/index.js'
import { openStore } from '../../src/store/index.js'

const [url, schema] = process.argv.slice(2)
const c = JSON.parse(process.env.CORRAL_TEST_OAUTH_CHILD!) as { key: string; ca: string; orgId: string; credId: string; clientSecret: string }
const store = await openStore(url!, schema === '-' ? {} : { schema, poolSize: 2 })
const http = new OAuthHttp({ extraCaPem: [c.ca], allowPrivate: ['127.0.0.1/32'] })
const minter = new OAuthMinter({ tables: store.oauth, store, sealer: new Sealer(Buffer.from(c.key, 'hex')), audit: { emit: async () => {} } as never, http })
const ref = { id: c.credId, orgId: c.orgId, name: 'gmail', provider: 'google', clientSecret: c.clientSecret }
process.stdout.write('ready\n')
for await (const line of createInterface({ input: process.stdin })) {
  if (line !== 'go') continue
  const got = await Promise.allSettled(Array.from({ length: 10 }, () => minter.mint(ref)))
  const tokens = [...new Set(got.flatMap((g) => (g.status === 'fulfilled' ? [g.value] : [])))]
  const errors = [...new Set(got.flatMap((g) => (g.status === 'rejected' ? [(g.reason as Error).constructor.name] : [])))]
  process.stdout.write(`${JSON.stringify({ tokens, errors, refreshes: minter.refreshes })}\n`)
  break
}
await http.close()
await store.close()
