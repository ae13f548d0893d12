#!/usr/bin/env node
// Production entry: runs the compiled commands from dist/ with the shipped oclif manifest.
//
// Startup budget: `corral --version` and `corral --help` must answer in under 150 ms
// (bench/cli-startup.ts measures it). Loading oclif alone costs more than that on a small machine,
// so those two answers are served without it: the version from package.json, the root help from
// dist/help.txt, which the build renders with oclif itself right after `oclif manifest` (so it is
// oclif's own text). Everything else, and any doubt (no cache, cache older than the manifest), goes
// through oclif as usual.
import { readFileSync, statSync } from 'node:fs'
import module from 'node:module'
import { setFlagsFromString } from 'node:v8'

const argv = process.argv.slice(2)
const root = new URL('../', import.meta.url)

/** Same text as oclif's `config.userAgent`. */
function userAgent() {
  const { name, version } = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'))
  return `${name}/${version} ${process.platform}-${process.arch} node-${process.version}`
}

function fastPath() {
  const only = argv.length === 1 ? argv[0] : argv.length === 0 ? '' : undefined
  if (only === '--version' || only === '-v' || only === 'version') {
    process.stdout.write(`${userAgent()}\n`)
    return true
  }
  if (only === '--help' || only === '-h' || only === 'help' || only === '') {
    try {
      const cache = new URL('dist/help.txt', root)
      const stat = statSync(cache)
      if (stat.size === 0 || stat.mtimeMs < statSync(new URL('oclif.manifest.json', root)).mtimeMs) return false
      // The cached VERSION section names the build machine's platform and Node; show this one's.
      const text = readFileSync(cache, 'utf8').replace(/^(VERSION\n  )\S+ \S+ node-\S+$/m, `$1${userAgent()}`)
      process.stdout.write(text)
      return true
    } catch {
      return false
    }
  }
  return false
}

if (!fastPath()) {
  // V8's allocation-site pretenuring misjudges the proxy's per-request objects: once a burst of
  // slow requests lets them survive a scavenge, their sites allocate straight into the old
  // generation, which then grows by ~25 MB/s at 3,000 req/s and is reclaimed only by mark-compacts
  // (and every scavenge pays for the old-to-new pointers). Off, the same load scavenges a quarter
  // of the time and the event loop does ~12 % less work (docs/proxy.md "Sixth session"). Set before
  // any command code loads; a flag V8 does not know is ignored, never fatal.
  setFlagsFromString('--no-allocation-site-pretenuring')
  // `corral audit tail | head -3`: when the reader goes away, stop quietly instead of crashing on EPIPE.
  process.stdout.on('error', (error) => {
    if (error.code === 'EPIPE') process.exit(0)
    throw error
  })
  // Node ≥ 22.1 can keep compiled code between runs; it makes every command start faster.
  module.enableCompileCache?.()
  if (!(await capsLintWithoutOclif())) {
    // `@oclif/core/execute` rather than the package index: the index eagerly loads all of oclif.
    const { execute } = await import('@oclif/core/execute')
    await execute({ dir: import.meta.url })
  }
}

/**
 * `corral caps lint FILE... [--format X]` runs in CI on every push (budget: 400 ms, bench/policy.ts).
 * Its plain forms are served without oclif by the same functions the command uses; anything else
 * (--help, --json, bad flags, unreadable files) is declined and goes through oclif as usual.
 */
async function capsLintWithoutOclif() {
  if (argv[0] !== 'caps' || argv[1] !== 'lint') return false
  let lint
  try {
    lint = await import('../dist/cli/caps-lint.js')
  } catch {
    return false
  }
  return lint.lintWithoutOclif(argv.slice(2))
}
