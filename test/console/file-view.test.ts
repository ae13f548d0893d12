// The console's rule for showing a snapshot file (src/console/file-view.ts): UTF-8 text without
// control bytes is shown, anything else is download-only; the size cap.
import { describe, expect, it } from 'vitest'
import { sizeLabel, viewable, viewOf, VIEW_CAP } from '../../src/console/file-view.js'

const bytes = (s: string) => new TextEncoder().encode(s)

describe('console file view', () => {
  it('shows UTF-8 text (tabs, newlines, CRLF, form feed, non-ASCII) and drops a byte-order mark', () => {
    expect(viewOf(bytes('# hello\n\tworld\r\n\f√ é 日本\n'))).toEqual({ kind: 'text', text: '# hello\n\tworld\r\n\f√ é 日本\n' })
    expect(viewOf(bytes('\uFEFFhi'))).toEqual({ kind: 'text', text: 'hi' })
    expect(viewOf(new Uint8Array())).toEqual({ kind: 'text', text: '' })
  })

  it('treats invalid UTF-8, NUL and other control bytes as binary', () => {
    expect(viewOf(new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])).kind).toBe('binary')
    expect(viewOf(new Uint8Array([0xff, 0xfe, 0x41]))).toEqual({ kind: 'binary', reason: 'not UTF-8 text' })
    expect(viewOf(bytes('a\u0000b'))).toEqual({ kind: 'binary', reason: 'binary content' })
    expect(viewOf(bytes('bell \u0007'))).toEqual({ kind: 'binary', reason: 'binary content' })
    // ESC is not among them: a log with ANSI colours is text.
    expect(viewOf(bytes('\u001b[31mred\u001b[0m')).kind).toBe('text')
  })

  it('shows files up to the cap inline, larger ones as downloads only', () => {
    expect(viewable(VIEW_CAP)).toBe(true)
    expect(viewable(VIEW_CAP + 1)).toBe(false)
    expect([sizeLabel(12), sizeLabel(2048), sizeLabel(5 * 1024 * 1024)]).toEqual(['12 B', '2.0 KiB', '5.0 MiB'])
  })
})
