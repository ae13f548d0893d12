// A module that names a file beside itself (a worker thread's entry, the console's files) finds it
// in the sources, in tsc's dist/ and in the bundle (dist/bundle/, where one file holds many modules).
import { describe, expect, it } from 'vitest'
import { builtFile } from '../../src/proc/index.js'

describe('builtFile', () => {
  it('is the file beside the module in the sources and in tsc output', () => {
    expect(builtFile('file:///opt/corral/src/audit/merkle/append-host.ts', './append-worker.js', 'workers/append-worker.js').href)
      .toBe('file:///opt/corral/src/audit/merkle/append-worker.js')
    expect(builtFile('file:///opt/corral/dist/audit/merkle/append-host.js', './append-worker.js', 'workers/append-worker.js').href)
      .toBe('file:///opt/corral/dist/audit/merkle/append-worker.js')
    expect(builtFile('file:///opt/corral/dist/server/console.js', '../../dist/console/', '../console/').href)
      .toBe('file:///opt/corral/dist/console/')
  })

  it('is found from the bundle root wherever the bundler put the module', () => {
    for (const at of ['dist/bundle/chunks/chunk-ABC123.js', 'dist/bundle/commands/serve.js', 'dist/bundle/commands/admin/audit/query.js']) {
      expect(builtFile(`file:///opt/corral/${at}`, './append-worker.js', 'workers/append-worker.js').href)
        .toBe('file:///opt/corral/dist/bundle/workers/append-worker.js')
      expect(builtFile(`file:///opt/corral/${at}`, '../../dist/console/', '../console/').href).toBe('file:///opt/corral/dist/console/')
    }
  })

  it('takes the innermost dist/bundle/ when the install path itself holds one', () => {
    expect(builtFile('file:///srv/dist/bundle/app/dist/bundle/chunks/c.js', './w.js', 'workers/w.js').href)
      .toBe('file:///srv/dist/bundle/app/dist/bundle/workers/w.js')
  })
})
