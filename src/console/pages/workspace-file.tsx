// One file of a workspace's latest snapshot (GET /v1/workspaces/{id}/snapshot/content?path=…):
// shown as text when it is small and reads as text (file-view.ts), else offered as a download;
// directories download as a tar. The bytes come with the Bearer token, so a download is fetched and
// handed to the browser as an object URL (a plain link could not carry the token).
import { useEffect, useState, type ReactNode } from 'react'
import { seg, type Api } from '../api.js'
import { sizeLabel, viewable, viewOf, VIEW_CAP, type FileView } from '../file-view.js'
import { saveBlob } from '../save-file.js'
import { useSession } from '../session.js'
import { ErrorBox, useAction } from '../ui.js'
import type { SnapshotFileEntry } from '../wire.js'

/** Fetches a path of the latest snapshot and offers it as a file download named `name`. */
export async function downloadPath(api: Api, workspaceId: string, path: string, name: string): Promise<void> {
  const response = await api.raw(`/workspaces/${seg(workspaceId)}/snapshot/content`, { path }, { headers: { accept: '*/*' } })
  saveBlob(name, await response.blob())
}

const baseName = (path: string) => path.slice(path.lastIndexOf('/') + 1)

export function FileViewer(props: { workspaceId: string; entry: SnapshotFileEntry; onClose: () => void }): ReactNode {
  const { api } = useSession()
  const [view, setView] = useState<FileView>()
  const [error, setError] = useState<unknown>()
  const saving = useAction()
  const e = props.entry
  const inline = viewable(e.size)
  useEffect(() => {
    setView(undefined)
    setError(undefined)
    if (!inline) return
    const ctl = new AbortController()
    api
      .raw(`/workspaces/${seg(props.workspaceId)}/snapshot/content`, { path: e.path }, { headers: { accept: '*/*' }, signal: ctl.signal })
      .then(async (response) => viewOf(new Uint8Array(await response.arrayBuffer())))
      .then((v) => !ctl.signal.aborted && setView(v), (err: unknown) => !ctl.signal.aborted && setError(err))
    return () => ctl.abort()
  }, [props.workspaceId, e.path, e.size, e.mtime])
  return (
    <section aria-labelledby="file-title" className="file-view">
      <h3 id="file-title">
        <span className="mono">/data/{e.path}</span> <span className="muted">({sizeLabel(e.size)}{e.mime_type ? `, ${e.mime_type}` : ''})</span>
      </h3>
      <div className="actions">
        <button type="button" disabled={saving.busy} onClick={() => void saving.run(() => downloadPath(api, props.workspaceId, e.path, baseName(e.path)))}>
          Download {baseName(e.path)}
        </button>
        <button type="button" onClick={props.onClose}>
          Close file
        </button>
      </div>
      <ErrorBox error={error ?? saving.error} />
      {!inline && <p className="muted">Larger than {sizeLabel(VIEW_CAP)}: not shown here; download it.</p>}
      {inline && !view && error === undefined && <p aria-live="polite">Loading…</p>}
      {view?.kind === 'binary' && <p className="muted">Not shown: {view.reason}. Download it.</p>}
      {view?.kind === 'text' && (
        <pre className="file-text" aria-label={`Contents of ${e.path}`} tabIndex={0}>
          {view.text}
        </pre>
      )}
    </section>
  )
}
