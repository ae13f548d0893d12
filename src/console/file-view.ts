// How the console shows a file of a snapshot: as text when it is small enough and reads as UTF-8
// text, otherwise only as a download. Pure, so it is tested without a browser
// (test/console/file-view.test.ts).

/** Files up to this size are fetched and shown; larger ones are offered as a download only. */
export const VIEW_CAP = 256 * 1024

export type FileView = { kind: 'text'; text: string } | { kind: 'binary'; reason: string }

/** Text when the bytes are valid UTF-8 without NUL or other control bytes a text file does not hold. */
export function viewOf(bytes: Uint8Array): FileView {
  let text: string
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes)
  } catch {
    return { kind: 'binary', reason: 'not UTF-8 text' }
  }
  // Control characters other than tab, newline, carriage return, form feed and ESC (ANSI colours of
  // a log) mark a binary file.
  if (/[\u0000-\u0008\u000e-\u001a\u001c-\u001f\u007f]/.test(text)) return { kind: 'binary', reason: 'binary content' }
  return { kind: 'text', text: text.replace(/^\uFEFF/, '') }
}

/** Whether a listing entry of this size is shown inline (else: download only). */
export function viewable(size: number): boolean {
  return size <= VIEW_CAP
}

/** A human size: 1,234 B, 12.3 KiB, 4.5 MiB. */
export function sizeLabel(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`
}
