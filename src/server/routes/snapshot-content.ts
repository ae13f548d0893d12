// GET /v1/workspaces/{id}/snapshot/content?path=…[&snapshot=N]: one path of a workspace's snapshot
// — a regular file's bytes, or an uncompressed tar of a directory's subtree (of all of /data when
// `path` is empty) — read from the snapshot archive without unpacking it (src/runtime/
// snapshot-content.ts). A documented addition beside the spec's `GET …/snapshot/files` with the same
// permission (`workspace:read` or `:own`); `snapshot=N` picks the snapshot taken after N completed
// tasks (as a fork's `fork_point_task_count`), else the latest. The console reads files with it too.
import type { FastifyInstance } from 'fastify'
import { idParams } from '../schemas/common.js'
import { controllerOf } from '../task-input.js'
import type { ServerDeps } from '../types.js'
import { ownedWorkspace } from '../workspace-access.js'

const READ = [['workspace:read', 'workspace:read:own']] as const

const querystring = {
  type: 'object', additionalProperties: false,
  properties: {
    path: { type: 'string', maxLength: 4096, description: "A path relative to /data, as the snapshot listing names it; empty or absent: all of /data (as a tar)." },
    snapshot: { type: 'string', pattern: '^[0-9]{1,9}$', description: 'The snapshot taken after this many completed tasks (default: the latest).' },
  },
} as const

const CONTENT_DOC = {
  response: {
    200: {
      description: 'A file: its bytes (content-type from its name, else application/octet-stream). A directory (or no path): application/x-tar of its subtree, the archive\'s own records. Headers: corral-entry-type (file | directory | snapshot), content-length, last-modified (a file\'s or directory\'s mtime).',
      content: {
        'application/octet-stream': { schema: { type: 'string', format: 'binary' } },
        'application/x-tar': { schema: { type: 'string', format: 'binary' } },
      },
    },
  },
}

export async function snapshotContentRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  app.get<{ Params: { id: string }; Querystring: { path?: string; snapshot?: string } }>(
    '/workspaces/:id/snapshot/content',
    { config: { permission: READ, openapi: CONTENT_DOC }, schema: { params: idParams, querystring } },
    async (request, reply) => {
      const controller = controllerOf(deps)
      const ws = await ownedWorkspace(controller, request, request.params.id)
      const q = request.query
      const content = await controller.snapshotContent(ws.org_id, ws.id, q.path ?? '', q.snapshot === undefined ? undefined : Number(q.snapshot))
      const type = content.kind === 'tar' ? (content.entry ? 'directory' : 'snapshot') : 'file'
      reply.header('corral-entry-type', type)
      reply.header('content-length', String(content.size))
      reply.header('cache-control', 'no-store')
      // Never rendered by a browser as a page of ours: agent-written HTML or SVG stays inert.
      reply.header('content-security-policy', "default-src 'none'; sandbox")
      reply.header('x-content-type-options', 'nosniff')
      if (content.entry) reply.header('last-modified', new Date(content.entry.mtime * 1000).toUTCString())
      const name = (content.entry?.path.split('/').at(-1) ?? ws.id) + (content.kind === 'tar' ? '.tar' : '')
      reply.header('content-disposition', `attachment; filename*=UTF-8''${encodeURIComponent(name)}`)
      reply.type(content.kind === 'tar' ? 'application/x-tar' : 'application/octet-stream')
      return reply.send(content.stream)
    },
  )
}
