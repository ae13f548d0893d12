// Tasks (spec "Workspaces and tasks"): POST /v1/tasks creates a workspace from a role and queues
// its first task atomically (202 + task accepted response); GET /v1/tasks/{id}; cancel. Ownership
// of a task is the ownership of its workspace.
import multipart from '@fastify/multipart'
import type { FastifyInstance } from 'fastify'
import { apiError, taskAcceptedSchema, taskSchema } from '../../contract/index.js'
import { idParams } from '../schemas/common.js'
import type { ServerDeps } from '../types.js'
import { actorOf, taskBodyDoc, controllerOf, readTaskInput, resolveRole, runnableController, taskView, withStagedUploads, type TaskLimiter } from '../task-input.js'
import { ownedWorkspace } from '../workspace-access.js'

const CREATE = [['workspace:write', 'workspace:write:own'], ['tasks:write', 'tasks:write:own']] as const
const READ = [['workspace:read', 'workspace:read:own']] as const
const TASKS_WRITE = [['tasks:write', 'tasks:write:own']] as const

export async function taskRoutes(app: FastifyInstance, deps: ServerDeps, shared: { taskLimiter: TaskLimiter }): Promise<void> {
  await app.register(multipart)
  const limiter = shared.taskLimiter

  app.post(
    '/tasks',
    { config: { permission: CREATE, openapi: { body: taskBodyDoc(false) } }, schema: { response: { 202: taskAcceptedSchema } } },
    async (request, reply) => {
      const controller = runnableController(deps)
      const p = request.principal!
      limiter.enforce(p.org.id, reply)
      const { role: ref, ...input } = await readTaskInput(request, controller, { followUp: false })
      const { workspace, task } = await withStagedUploads(controller, input, async () => {
        const role = await resolveRole(controller, p.org.id, ref ?? {})
        return controller.createWorkspace(p.org.id, actorOf(request), role, input)
      })
      reply.code(202)
      return { task_id: task!.id, workspace_id: workspace.id, status: task!.status }
    },
  )

  app.get<{ Params: { id: string } }>(
    '/tasks/:id',
    { config: { permission: READ }, schema: { params: idParams, response: { 200: taskSchema } } },
    async (request) => {
      const controller = controllerOf(deps)
      const task = await controller.task(request.principal!.org.id, request.params.id)
      if (!task) throw apiError('not_found', `task ${request.params.id} not found`)
      await ownedWorkspace(controller, request, task.workspace_id)
      return taskView(task)
    },
  )

  app.post<{ Params: { id: string } }>(
    '/tasks/:id/cancel',
    { config: { permission: TASKS_WRITE, openapi: { noBody: true } }, schema: { params: idParams, response: { 200: taskSchema } } },
    async (request) => {
      const controller = controllerOf(deps)
      const task = await controller.task(request.principal!.org.id, request.params.id)
      if (!task) throw apiError('not_found', `task ${request.params.id} not found`)
      await ownedWorkspace(controller, request, task.workspace_id)
      return taskView(await controller.cancelTask(task.org_id, task.id))
    },
  )
}
