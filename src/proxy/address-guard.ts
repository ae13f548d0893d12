// The address guard lives in src/net/ since OAuth's server-side fetches use it too (docs/design.md
// "src/net/"); the proxy's files keep importing it by this name.
export * from '../net/index.js'
