// Where a file of this build is, for a module that names one beside itself (a worker thread's
// entry, the console's files). In tsc's output and the sources a module is its own file; in the
// bundle (dist/bundle/, scripts/bundle.mjs) one file holds many modules at whatever depth the
// bundler chose, so the file is found from the bundle's root instead.
const BUNDLE = '/dist/bundle/'

/** `besideModule` resolved against `moduleUrl`, or `inBundle` against dist/bundle/ when the module is bundled. */
export function builtFile(moduleUrl: string, besideModule: string, inBundle: string): URL {
  const at = moduleUrl.lastIndexOf(BUNDLE)
  return at < 0 ? new URL(besideModule, moduleUrl) : new URL(inBundle, moduleUrl.slice(0, at + BUNDLE.length))
}
