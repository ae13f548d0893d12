// Saving a file from the browser: an object URL on a temporary link, clicked (nothing leaves the
// browser); the URL is revoked once the download has had time to start.
export function saveBlob(name: string, blob: Blob): void {
  const url = URL.createObjectURL(blob)
  const a = document.createElement('a')
  a.href = url
  a.download = name
  document.body.append(a)
  a.click()
  a.remove()
  setTimeout(() => URL.revokeObjectURL(url), 10_000)
}
