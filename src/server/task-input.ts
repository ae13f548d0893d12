// What POST /v1/tasks and POST /v1/workspaces/{id}/tasks share: the request body as JSON or
// multipart/form-data (repeatable `file` parts, written to the controller's staging directory
// until the workspace's /data exists, then moved to /data/uploads/<task_id>/), one validator for
// both (multipart fields arrive as strings and are coerced first), role resolution with its
// refusals, the per-org task rate limit, and the removal of staged files when a request is refused.
import { once } from 'node:events'
import { createWriteStream } from 'node:fs'
import { mkdir, rm } from 'node:fs/promises'
import { basename, join } from 'node:path'
import type { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { createRequire } from 'node:module'
import type { ValidateFunction } from 'ajv'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { compilePolicyCached } from '../policy/index.js'
import type { Actor, TaskInput, WorkspaceService } from '../workspaces/index.js'
import { newId, CorralError, ENVIRONMENTS, THINKING_EFFORTS, assertCleanInput, apiError } from '../contract/index.js'
import type { RoleConfig, TaskRecord } from '../store/index.js'
import { fieldsOf } from './validation.js'
import { isMalformedBody, readParts } from './multipart-file.js'
import { enforceRateLimit, TokenBucketLimiter } from './rate-limit.js'
import type { ServerConfig, ServerDeps } from './types.js'

export interface TaskBodyFields {
  role_id?: string
  role_name?: string
  description: string
  environment?: string
  thinking_effort?: string
  max_continuations?: number
  max_context_tokens?: number
  reset_session?: boolean
  metadata?: Record<string, unknown>
}

const common = {
  description: { type: 'string', minLength: 1, maxLength: 100_000 },
  thinking_effort: { type: 'string', enum: THINKING_EFFORTS },
  max_continuations: { type: 'integer', minimum: 0, maximum: 1000 },
  max_context_tokens: { type: 'integer', minimum: 0 },
} as const
const createBody = {
  type: 'object', required: ['description'], additionalProperties: false,
  properties: { ...common, role_id: { type: 'string', minLength: 1 }, role_name: { type: 'string', minLength: 1 }, environment: { type: 'string', enum: ENVIRONMENTS } },
} as const
const followUpBody = {
  type: 'object', required: ['description'], additionalProperties: false,
  properties: { ...common, reset_session: { type: 'boolean' }, metadata: { type: 'object' } },
} as const

const require = createRequire(import.meta.url)
let bodyValidators: { create: ValidateFunction; followUp: ValidateFunction } | undefined
/** Compiled at the first task body, not at import: an idle server holds no ajv for them. */
function validators(): { create: ValidateFunction; followUp: ValidateFunction } {
  if (!bodyValidators) {
    const { Ajv } = require('ajv') as typeof import('ajv')
    const ajv = new Ajv({ allErrors: true, coerceTypes: false })
    bodyValidators = { create: ajv.compile(createBody), followUp: ajv.compile(followUpBody) }
  }
  return bodyValidators
}

/** At most this many files per task, each at most MAX_FILE_BYTES. */
const MAX_FILES = 20
const MAX_FILE_BYTES = 100 * 1024 * 1024

/**
 * The task body for the OpenAPI document (src/server/openapi.ts): JSON, or multipart with the same
 * fields as text parts plus repeatable `file` parts. Validation stays in readTaskInput.
 */
export function taskBodyDoc(followUp: boolean): { content: Record<string, { schema: Record<string, unknown> }> } {
  const json = followUp ? followUpBody : createBody
  const parts = Object.fromEntries(Object.entries(json.properties).map(([k, v]) => [k, v.type === 'string' ? v : { type: 'string', description: `${v.type}, as text` }]))
  return {
    content: {
      'application/json': { schema: json },
      'multipart/form-data': {
        schema: { type: 'object', required: ['description'], properties: { ...parts, file: { type: 'array', items: { type: 'string', contentEncoding: 'binary' }, description: `Uploads (at most ${MAX_FILES}); they land in /data/uploads/<task id>/.` } } },
      },
    },
  }
}

export function taskView(t: TaskRecord): Record<string, unknown> {
  const { org_id: _o, ...rest } = t
  return rest
}

export function controllerOf(deps: ServerDeps): WorkspaceService {
  if (!deps.lifecycle.controller) throw apiError('service_unavailable', 'this server runs no workspace controller')
  return deps.lifecycle.controller
}

/** The controller, for routes that start work: refused with the runtime's reason when it cannot run here. */
export function runnableController(deps: ServerDeps): WorkspaceService {
  const controller = controllerOf(deps)
  if (!deps.lifecycle.available) throw apiError('service_unavailable', deps.lifecycle.reason)
  return controller
}

export function actorOf(request: FastifyRequest): Actor {
  const p = request.principal!
  return { userId: p.userId, creatorId: p.creatorId }
}

/** role_id takes precedence over role_name when both are given (docs/workspaces.md). */
export async function resolveRole(controller: WorkspaceService, orgId: string, ref: { role_id?: string; role_name?: string }): Promise<RoleConfig> {
  if (!ref.role_id && !ref.role_name) throw apiError('validation_error', 'role_id or role_name is required', { fields: { role_id: 'role_id or role_name is required' } })
  const role = await controller.role(orgId, ref.role_id ? { id: ref.role_id } : { name: ref.role_name! })
  if (!role) throw apiError('not_found', `agent role ${ref.role_id ?? ref.role_name} not found`)
  // The provider first: archiving it archives its roles too (and a role cannot be unarchived while
  // its provider is), so a role of an archived provider is always archived itself — the provider is
  // the cause to name, and the one to unarchive first.
  if (role.provider_archived) throw apiError('provider_archived', `provider ${role.provider_name} of role ${role.name} is archived; unarchive the provider, then the role`)
  if (role.role_archived) throw apiError('role_archived', `agent role ${role.name} is archived; unarchive it first`)
  if (role.capabilities?.trim()) {
    const compiled = compilePolicyCached(role.capabilities)
    if (!compiled.ok) {
      const issues = compiled.diagnostics.filter((d) => d.severity === 'error').slice(0, 20).map((d) => ({ code: d.code, message: d.message, line: d.line, column: d.column }))
      throw apiError('invalid_capabilities', `the capabilities of role ${role.name} do not compile: ${issues[0]?.message ?? 'invalid policy'}`, { issues })
    }
  }
  return role
}

export interface TaskLimiter {
  enforce(orgId: string, reply: FastifyReply): void
}

/**
 * Per-org bucket on task create and follow-up (spec Limits), one per app (buildApp makes it and
 * hands it to both route plugins). Size and refill: docs/workspaces.md. The bucket is made at the
 * first task, from the config as it is then.
 */
export function taskLimiter(config: ServerConfig): TaskLimiter {
  let limiter: TokenBucketLimiter | false | undefined
  return {
    enforce(orgId, reply) {
      if (limiter === undefined) {
        const conf = config.taskRateLimit ?? { capacity: 30, refillPerSecond: 0.5 }
        limiter = conf === false ? false : new TokenBucketLimiter(conf)
      }
      if (limiter) enforceRateLimit(limiter, `tasks:${orgId}`, reply)
    },
  }
}

/**
 * Reads and validates the task body (JSON or multipart). Uploaded files are written under the
 * controller's staging dir for the new task id; they are removed again if the body is refused.
 */
export async function readTaskInput(request: FastifyRequest, controller: WorkspaceService, opts: { followUp: boolean }): Promise<TaskInput & { role?: { role_id?: string; role_name?: string } }> {
  const id = newId('task')
  let fields: Record<string, unknown>
  let uploads: string[] = []
  if (request.isMultipart()) {
    ;({ fields, uploads } = await readMultipart(request, controller.stagingDir(id)))
  } else {
    fields = (request.body ?? {}) as Record<string, unknown>
    if (typeof fields !== 'object' || Array.isArray(fields)) throw apiError('validation_error', 'the body must be a JSON object', { fields: { body: 'must be an object' } })
  }
  const validate = opts.followUp ? validators().followUp : validators().create
  if (!validate(fields)) {
    await rm(controller.stagingDir(id), { recursive: true, force: true })
    const f = fieldsOf(validate.errors ?? [], 'body')
    throw apiError('validation_error', `invalid body: ${Object.entries(f).map(([k, v]) => `${k} ${v}`).join('; ')}`, { fields: f })
  }
  const b = fields as unknown as TaskBodyFields
  return {
    id,
    description: b.description,
    options: {
      ...(b.reset_session !== undefined ? { reset_session: b.reset_session } : {}),
      ...(b.environment ? { environment: b.environment } : {}),
      ...(b.thinking_effort ? { thinking_effort: b.thinking_effort } : {}),
      ...(b.max_continuations !== undefined ? { max_continuations: b.max_continuations } : {}),
      ...(b.max_context_tokens !== undefined ? { max_context_tokens: b.max_context_tokens } : {}),
    },
    ...(b.metadata ? { metadata: b.metadata } : {}),
    uploads,
    role: { ...(b.role_id ? { role_id: b.role_id } : {}), ...(b.role_name ? { role_name: b.role_name } : {}) },
  }
}

/**
 * Runs what creates the task (role resolution and workspace create, or the follow-up submit).
 * When it is refused before the task row exists (unknown role, busy workspace, ...), the files
 * staged for the task are removed with the refusal; once the row exists they are the task's.
 */
export async function withStagedUploads<T>(controller: WorkspaceService, input: TaskInput, create: () => Promise<T>): Promise<T> {
  try {
    return await create()
  } catch (err) {
    const id = input.id
    if (id && input.uploads?.length && !(await controller.taskExists(id))) await rm(controller.stagingDir(id), { recursive: true, force: true })
    throw err
  }
}

/**
 * The multipart body (read by readParts, multipart-file.ts): fields, and `file` parts streamed to
 * `staging`. On any failure the staged files are removed before the error is thrown.
 */
async function readMultipart(request: FastifyRequest, staging: string): Promise<{ fields: Record<string, unknown>; uploads: string[] }> {
  const fields: Record<string, unknown> = {}
  const uploads: string[] = []
  const failure = await readParts(request, {
    limits: { files: MAX_FILES, fileSize: MAX_FILE_BYTES },
    file(part) {
      if (part.fieldname !== 'file') throw apiError('validation_error', `unexpected file field ${part.fieldname}`, { fields: { [part.fieldname]: 'only `file` parts are accepted' } })
      const name = basename(part.filename || '')
      if (!name || name === '.' || name === '..' || uploads.includes(name)) {
        throw apiError('validation_error', `bad or duplicate upload name ${JSON.stringify(part.filename)}`, { fields: { file: 'each file needs a distinct plain name' } })
      }
      // What the file system refuses (a name over 255 bytes, a NUL) is the client's error, not a 500.
      if (Buffer.byteLength(name) > 255 || name.includes('\0')) {
        throw apiError('validation_error', `upload name ${JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}…` : name)} is over 255 bytes or holds NUL`, { fields: { file: 'names are at most 255 bytes, without NUL' } })
      }
      uploads.push(name)
      return {
        consume: (stream) => mkdir(staging, { recursive: true }).then(() => writeFile(stream, join(staging, name))),
        cutShort: () => cutShort(name),
        tooLarge: () => tooLarge(name),
        stopAtLimit: true,
      }
    },
    field(part) {
      // Multipart fields bypass the JSON parser's input check (edge.ts): the same check here.
      assertCleanInput({ [part.fieldname]: String(part.value) }, 'body')
      fields[part.fieldname] = coerce(part.fieldname, String(part.value))
    },
  })
  if (failure === undefined) return { fields, uploads }

  await rm(staging, { recursive: true, force: true })
  const code = (failure as { code?: string }).code
  if (code === 'FST_REQ_FILE_TOO_LARGE') throw tooLarge()
  if (code === 'FST_FILES_LIMIT') throw apiError('payload_too_large', `at most ${MAX_FILES} files per task`)
  if (failure instanceof CorralError) throw failure
  if (isMalformedBody(failure)) throw apiError('validation_error', `the body is not valid multipart/form-data (${(failure as Error).message})`, { fields: { body: 'is not valid multipart/form-data' } })
  throw failure
}

/** Like pipeline, but a failed write settles only once the file is closed, so removing the staging dir afterwards is final. */
async function writeFile(source: Readable, path: string): Promise<void> {
  const out = createWriteStream(path, { mode: 0o644 })
  try {
    await pipeline(source, out)
  } catch (err) {
    if (!out.closed) await once(out, 'close')
    throw err
  }
}

function tooLarge(name?: string) {
  return apiError('payload_too_large', `${name ? `upload ${name}` : 'an upload'} is over ${MAX_FILE_BYTES} bytes`)
}

function cutShort(name: string) {
  return apiError('validation_error', `the body ended in the middle of upload ${name}`, { fields: { file: `${name} ended before its end (truncated upload)` } })
}

/** Multipart values are strings; integers, booleans and the metadata object are parsed here. */
function coerce(name: string, value: string): unknown {
  if ((name === 'max_continuations' || name === 'max_context_tokens') && /^\d+$/.test(value)) return Number(value)
  if (name === 'reset_session' && (value === 'true' || value === 'false')) return value === 'true'
  if (name === 'metadata') {
    try {
      return JSON.parse(value) as unknown
    } catch {
      return value
    }
  }
  return value
}
