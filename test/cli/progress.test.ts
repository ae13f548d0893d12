// ByteProgress (src/cli/progress.ts), the byte counter of uploads and downloads on stderr: off a
// terminal plain lines at most every LINE_EVERY_MS (none for a short transfer), on a terminal one
// status line redrawn with a bar; nothing at all when disabled (--json, --quiet). A fake clock,
// no waiting.
import { PassThrough } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { ByteProgress, LINE_EVERY_MS } from '../../src/cli/progress.js'

function sink(tty: boolean) {
  const s = new PassThrough() as PassThrough & { isTTY?: boolean }
  s.isTTY = tty
  let out = ''
  s.on('data', (d) => { out += d })
  return { stream: s as unknown as NodeJS.WriteStream, text: () => out }
}

describe('ByteProgress', () => {
  it('off a terminal: nothing before the first interval, then one plain line per interval, then the final line', () => {
    let now = 1_000
    const out = sink(false)
    const p = new ByteProgress('Uploading', 4 * 1024 * 1024, { enabled: true, stream: out.stream, now: () => now })
    p.add(1024 * 1024)
    expect(out.text()).toBe('')
    now += LINE_EVERY_MS
    p.add(1024 * 1024)
    p.add(1024 * 1024) // same interval: no new line
    expect(out.text()).toBe('Uploading: 2.0 MB of 4.0 MB (50%)\n')
    now += LINE_EVERY_MS
    p.add(2 * 1024 * 1024) // more than the total (multipart framing): shown as the total
    p.done('Uploaded.')
    expect(out.text()).toBe('Uploading: 2.0 MB of 4.0 MB (50%)\nUploading: 4.0 MB of 4.0 MB (100%)\nUploaded.\n')
    expect(out.text()).not.toMatch(/\r|\u001B\[/)
  })

  it('on a terminal: one line redrawn in place with a bar; an unknown total shows the bytes', () => {
    let now = 1_000
    const out = sink(true)
    const p = new ByteProgress('Downloading x', 1000, { enabled: true, stream: out.stream, now: () => now })
    p.add(500)
    now += 200
    p.add(500)
    expect(out.text()).toContain('\r\u001B[2K')
    expect(out.text()).toMatch(/Downloading x: \[##########\.{10}\] 500 B of 1000 B \(50%\)/)
    expect(out.text()).toMatch(/Downloading x: \[#{20}\] 1000 B of 1000 B \(100%\)/)
    const open = sink(true)
    new ByteProgress('Uploading', undefined, { enabled: true, stream: open.stream, now: () => 1_000 }).add(2048)
    expect(open.text()).toMatch(/Uploading: 2\.0 kB/)
  })

  it('disabled (--json, --quiet): counts, prints nothing', () => {
    const out = sink(false)
    let now = 0
    const p = new ByteProgress('Uploading', 10, { enabled: false, stream: out.stream, now: () => now })
    now += 10 * LINE_EVERY_MS
    p.add(10)
    p.done('Uploaded.')
    expect(out.text()).toBe('')
  })
})
