// One path of a workspace's snapshot (GET /v1/workspaces/{id}/snapshot/content): a file's bytes or a
// tar of a directory (or of all of /data), handed back as a stream with what the server said it is.
import type { Readable } from 'node:stream'
import { Readable as NodeReadable } from 'node:stream'
import type { CorralClient } from './client.js'
import { ApiConnectionError, apiErrorFrom } from './errors.js'

export interface SnapshotContentAnswer {
  /** `file`: the bytes of a regular file; `directory` / `snapshot`: an uncompressed tar. */
  type: 'file' | 'directory' | 'snapshot'
  /** Bytes the body carries (content-length). */
  size: number
  body: Readable
}

export async function snapshotContent(client: CorralClient, workspaceId: string, q: { path?: string; snapshot?: number; signal?: AbortSignal } = {}): Promise<SnapshotContentAnswer> {
  const url = client.url(`/workspaces/${encodeURIComponent(workspaceId)}/snapshot/content`, { path: q.path, snapshot: q.snapshot })
  let res: Response
  try {
    res = await client.fetchImpl(url, { headers: client.headers({ accept: 'application/octet-stream, application/x-tar' }), ...(q.signal ? { signal: q.signal } : {}) })
  } catch (err) {
    throw new ApiConnectionError(client.apiUrl, err)
  }
  if (!res.ok) throw await apiErrorFrom(res)
  const type = res.headers.get('corral-entry-type')
  return {
    type: type === 'directory' || type === 'snapshot' ? type : 'file',
    size: Number(res.headers.get('content-length') ?? 0),
    body: res.body ? NodeReadable.fromWeb(res.body as import('node:stream/web').ReadableStream) : NodeReadable.from([]),
  }
}
