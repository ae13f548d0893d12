// Workspaces (spec "Workspaces and tasks"): create, list, show, follow-up task, stop, archive,
// unarchive, fork and the snapshot listing. State changes go through the workspace controller
// (src/workspaces); this file only checks input, permissions and ownership.
// `:own` grants are satisfied by the creator match (`principal.creatorId`: the user id, or the
// API key id); a workspace of another org is `workspace_not_found`.
import multipart from '@fastify/multipart'
import type { FastifyInstance } from 'fastify'
import { WORKSPACE_STATES, type WorkspaceRecord } from '../../store/index.js'
import { apiError, snapshotFilesSchema, taskAcceptedSchema, taskSchema, workspaceSchema } from '../../contract/index.js'
import { idParams } from '../schemas/common.js'
import type { ServerDeps } from '../types.js'
import { ownedWorkspace } from '../workspace-access.js'
import { actorOf, taskBodyDoc, controllerOf, readTaskInput, resolveRole, runnableController, taskView, withStagedUploads, type TaskBodyFields, type TaskLimiter } from '../task-input.js'

const READ = [['workspace:read', 'workspace:read:own']] as const
const WRITE = [['workspace:write', 'workspace:write:own']] as const
const TASKS_WRITE = [['tasks:write', 'tasks:write:own']] as const

export function workspaceView(ws: WorkspaceRecord): Record<string, unknown> {
  const { created_by_user_id: _u, stopped_once: _s, last_snapshot_ref, environment: _e, ...rest } = ws
  return { ...rest, has_snapshot: last_snapshot_ref !== undefined }
}

const statusResponse = (value: string) => ({ type: 'object', required: ['status', 'workspace'], properties: { status: { type: 'string', enum: [value] }, workspace: workspaceSchema } }) as const

export async function workspaceRoutes(app: FastifyInstance, deps: ServerDeps, shared: { taskLimiter: TaskLimiter }): Promise<void> {
  await app.register(multipart)
  workspaceReadWriteRoutes(app, deps, shared.taskLimiter)
  workspaceStateRoutes(app, deps)
  workspaceForkRoutes(app, deps)
}

/** Create, list and read workspaces, and submit a follow-up task. */
function workspaceReadWriteRoutes(app: FastifyInstance, deps: ServerDeps, limiter: TaskLimiter): void {

  app.post<{ Body: { role_id?: string; role_name?: string } }>(
    '/workspaces',
    {
      config: { permission: WRITE },
      schema: {
        body: { type: 'object', additionalProperties: false, properties: { role_id: { type: 'string', minLength: 1 }, role_name: { type: 'string', minLength: 1 } } },
        response: { 201: workspaceSchema },
      },
    },
    async (request, reply) => {
      const controller = runnableController(deps)
      const p = request.principal!
      const role = await resolveRole(controller, p.org.id, request.body ?? {})
      const { workspace } = await controller.createWorkspace(p.org.id, actorOf(request), role)
      reply.code(201)
      return workspaceView(workspace)
    },
  )

  app.get<{ Querystring: { state?: string; role?: string; creator?: string; limit?: number } }>(
    '/workspaces',
    {
      config: { permission: READ },
      schema: {
        querystring: {
          type: 'object', additionalProperties: false,
          properties: { state: { type: 'string' }, role: { type: 'string' }, creator: { type: 'string' }, limit: { type: 'string', pattern: '^[0-9]{1,4}$' } },
        },
        response: { 200: { type: 'object', required: ['workspaces'], properties: { workspaces: { type: 'array', items: workspaceSchema } } } },
      },
    },
    async (request) => {
      const controller = controllerOf(deps)
      const p = request.principal!
      const q = request.query
      const states = q.state ? q.state.split(',').map((s) => s.trim()).filter(Boolean) : undefined
      const bad = states?.find((s) => !(WORKSPACE_STATES as readonly string[]).includes(s))
      if (bad) throw apiError('validation_error', `unknown state ${bad}`, { fields: { state: `must be among ${WORKSPACE_STATES.join(', ')}` } })
      // A `:own` reader sees only its own workspaces, whatever `creator` says.
      const creator = request.grants[0]?.scope === 'own' ? p.creatorId : q.creator
      const list = await controller.list(p.org.id, {
        ...(states ? { state: states } : {}), ...(q.role ? { role: q.role } : {}), ...(creator ? { creator } : {}),
        ...(q.limit ? { limit: Math.min(1000, Math.max(1, Number(q.limit))) } : {}),
      })
      return { workspaces: list.map(workspaceView) }
    },
  )

  app.get<{ Params: { id: string } }>(
    '/workspaces/:id',
    { config: { permission: READ }, schema: { params: idParams, response: { 200: workspaceSchema } } },
    async (request) => workspaceView(await ownedWorkspace(controllerOf(deps), request, request.params.id)),
  )

  app.post<{ Params: { id: string }; Body: TaskBodyFields }>(
    '/workspaces/:id/tasks',
    { config: { permission: TASKS_WRITE, openapi: { body: taskBodyDoc(true) } }, schema: { params: idParams, response: { 202: taskAcceptedSchema } } },
    async (request, reply) => {
      const controller = runnableController(deps)
      const p = request.principal!
      const ws = await ownedWorkspace(controller, request, request.params.id)
      limiter.enforce(p.org.id, reply)
      const input = await readTaskInput(request, controller, { followUp: true })
      const task = await withStagedUploads(controller, input, () => controller.submitTask(p.org.id, actorOf(request), ws.id, input))
      reply.code(202)
      return { task_id: task.id, workspace_id: ws.id, status: task.status }
    },
  )

}

/** A workspace's tasks, and stop, archive and unarchive. */
function workspaceStateRoutes(app: FastifyInstance, deps: ServerDeps): void {
  app.get<{ Params: { id: string } }>(
    '/workspaces/:id/tasks',
    { config: { permission: READ }, schema: { params: idParams, response: { 200: { type: 'object', required: ['tasks'], properties: { tasks: { type: 'array', items: taskSchema } } } } } },
    async (request) => {
      const controller = controllerOf(deps)
      const ws = await ownedWorkspace(controller, request, request.params.id)
      return { tasks: (await controller.tasks(ws.org_id, ws.id)).map(taskView) }
    },
  )

  app.post<{ Params: { id: string } }>(
    '/workspaces/:id/stop',
    { config: { permission: WRITE, openapi: { noBody: true } }, schema: { params: idParams, response: { 200: statusResponse('stopped') } } },
    async (request) => {
      const controller = controllerOf(deps)
      const ws = await ownedWorkspace(controller, request, request.params.id)
      const stopped = await controller.stop(ws.org_id, ws.id, request.principal!.userId)
      return { status: 'stopped', workspace: workspaceView(stopped) }
    },
  )

  app.post<{ Params: { id: string } }>(
    '/workspaces/:id/archive',
    { config: { permission: WRITE, openapi: { noBody: true } }, schema: { params: idParams, response: { 200: statusResponse('archived') } } },
    async (request) => {
      const controller = controllerOf(deps)
      const ws = await ownedWorkspace(controller, request, request.params.id)
      return { status: 'archived', workspace: workspaceView(await controller.archive(ws.org_id, ws.id, request.principal!.userId)) }
    },
  )

  app.post<{ Params: { id: string } }>(
    '/workspaces/:id/unarchive',
    { config: { permission: WRITE, openapi: { noBody: true } }, schema: { params: idParams, response: { 200: statusResponse('unarchived') } } },
    async (request) => {
      const controller = controllerOf(deps)
      const ws = await ownedWorkspace(controller, request, request.params.id)
      return { status: 'unarchived', workspace: workspaceView(await controller.unarchive(ws.org_id, ws.id, request.principal!.userId)) }
    },
  )

}

/** Fork at a task count, and the files of the last snapshot. */
function workspaceForkRoutes(app: FastifyInstance, deps: ServerDeps): void {
  app.post<{ Params: { id: string }; Body: { fork_point_task_count: number } }>(
    '/workspaces/:id/fork',
    {
      config: { permission: READ },
      schema: {
        params: idParams,
        body: { type: 'object', required: ['fork_point_task_count'], additionalProperties: false, properties: { fork_point_task_count: { type: 'integer', minimum: 0 } } },
        response: { 202: { type: 'object', required: ['status', 'workspace_id'], properties: { status: { type: 'string' }, workspace_id: { type: 'string' }, parent_workspace_id: { type: 'string' }, fork_point_task_count: { type: 'integer' } } } },
      },
    },
    async (request, reply) => {
      const controller = runnableController(deps)
      const parent = await ownedWorkspace(controller, request, request.params.id)
      const role = await resolveRole(controller, parent.org_id, { role_id: parent.role_id })
      const child = await controller.fork(parent.org_id, actorOf(request), parent.id, request.body.fork_point_task_count, role)
      reply.code(202)
      return { status: child.state, workspace_id: child.id, parent_workspace_id: parent.id, fork_point_task_count: request.body.fork_point_task_count }
    },
  )

  app.get<{ Params: { id: string } }>(
    '/workspaces/:id/snapshot/files',
    {
      config: { permission: READ },
      schema: {
        params: idParams,
        response: { 200: snapshotFilesSchema },
      },
    },
    async (request) => {
      const controller = controllerOf(deps)
      const ws = await ownedWorkspace(controller, request, request.params.id)
      return { entries: await controller.snapshotFiles(ws.org_id, ws.id) }
    },
  )
}
