// The files of a workspace's latest snapshot (GET /v1/workspaces/{id}/snapshot/files): metadata
// read from the archive without unpacking it, browsed one directory at a time; a file opens in the
// viewer (workspace-file.tsx), a directory downloads as a tar.
import { useEffect, useState, type ReactNode } from 'react'
import { ApiFailure, seg } from '../api.js'
import { sizeLabel } from '../file-view.js'
import { useSession } from '../session.js'
import { ErrorBox, Status, useAction, useLoad } from '../ui.js'
import type { SnapshotFileEntry as Entry, WorkspaceRecord } from '../wire.js'
import { downloadPath, FileViewer } from './workspace-file.js'

const norm = (p: string) => p.replace(/^\.?\/+/, '').replace(/\/+$/, '')
const parentOf = (p: string) => (p.includes('/') ? p.slice(0, p.lastIndexOf('/')) : '')

export function SnapshotFiles(props: { ws: WorkspaceRecord }): ReactNode {
  const { api } = useSession()
  const [dir, setDir] = useState('')
  const [open, setOpen] = useState<Entry>()
  const saving = useAction()
  // A new snapshot (another task ran) may no longer hold the open file as it was.
  useEffect(() => setOpen(undefined), [props.ws.id, props.ws.task_count])
  const files = useLoad(async (signal) => {
    // Asked only once there is a snapshot (the record says so), so the page makes no 404s.
    if (!props.ws.has_snapshot) return undefined
    try {
      return (await api.get<{ entries: Entry[] }>(`/workspaces/${seg(props.ws.id)}/snapshot/files`, {}, signal)).entries
    } catch (err) {
      if (err instanceof ApiFailure && err.status === 404) return undefined
      throw err
    }
  }, [props.ws.id, props.ws.has_snapshot, props.ws.state, props.ws.task_count])
  const entries = (files.data ?? []).map((e) => ({ ...e, path: norm(e.path) })).filter((e) => e.path !== '' && parentOf(e.path) === dir)
  return (
    <section aria-labelledby="files-title">
      <h2 id="files-title">Snapshot files</h2>
      <Status loaded={files} />
      {!files.loading && files.data === undefined && <p className="muted">No snapshot yet (one is taken when a task ends or the workspace stops).</p>}
      {files.data && (
        <>
          <p className="mono">
            /data/{dir}
            {dir && (
              <>
                {' '}
                <button type="button" onClick={() => setDir(parentOf(dir))}>
                  Up
                </button>
              </>
            )}{' '}
            <button type="button" disabled={saving.busy} onClick={() => void saving.run(() => downloadPath(api, props.ws.id, dir, `${dir ? dir.slice(dir.lastIndexOf('/') + 1) : props.ws.id}.tar`))}>
              Download {dir ? 'this directory' : 'all of /data'} (.tar)
            </button>
          </p>
          <ErrorBox error={saving.error} />
          <table aria-label="Snapshot files">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Size</th>
                <th scope="col">Modified</th>
              </tr>
            </thead>
            <tbody>
              {entries.map((e) => (
                <tr key={e.path}>
                  <td className="mono">
                    {e.is_dir ? (
                      <button type="button" className="linkish" onClick={() => setDir(e.path)}>
                        {e.path.slice(dir ? dir.length + 1 : 0)}/
                      </button>
                    ) : (
                      <button type="button" className="linkish" aria-pressed={open?.path === e.path} onClick={() => setOpen(e)}>
                        {e.path.slice(dir ? dir.length + 1 : 0)}
                      </button>
                    )}
                  </td>
                  <td>{e.is_dir ? '' : sizeLabel(e.size)}</td>
                  <td>{new Date(e.mtime * (e.mtime < 1e12 ? 1000 : 1)).toISOString().replace('T', ' ').slice(0, 19)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {open && <FileViewer key={open.path} workspaceId={props.ws.id} entry={open} onClose={() => setOpen(undefined)} />}
        </>
      )}
    </section>
  )
}
