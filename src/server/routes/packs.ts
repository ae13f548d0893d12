// Packs (spec "Pack", "Packs"): the HTTP side — schemas, the multipart upload, the Pack view.
// What each operation does (ownership, registry pulls and pushes, content collection, the
// agent-pack rules) is the pack service's, src/packs/pack-service.ts. Decisions: docs/packs.md.
import multipart from '@fastify/multipart'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { CorralError, apiError } from '../../contract/index.js'
import { PackService, type IngestedPack, type PackActor, type PackContent, type PackUpdate } from '../../packs/index.js'
import { PACK_VISIBILITIES, type PackRecord, type PackVisibility } from '../../store/index.js'
import { isMalformedBody, isTooLarge, readParts } from '../multipart-file.js'
import { ANY_MEMBER, CAPS_WRITE } from '../permissions.js'
import { NAME_SCHEMA, dateTime, idParams, statusOnly } from '../schemas/common.js'
import type { ServerDeps } from '../types.js'
import { fieldError } from '../validation.js'

const packSchema = {
  type: 'object',
  required: ['id', 'name', 'display_name', 'version', 'tier', 'visibility', 'owned'],
  properties: {
    id: { type: 'string' },
    org_id: { type: 'string' },
    name: { type: 'string' },
    display_name: { type: 'string' },
    description: { type: 'string' },
    version: { type: 'string' },
    tier: { type: 'string' },
    visibility: { type: 'string' },
    category: { type: 'string' },
    capabilities: { type: 'string' },
    suggested_packs: { type: 'string' },
    image_origin: { type: 'string' },
    image_ref: { type: 'string' },
    image_digest: { type: 'string' },
    size_bytes: { type: 'integer' },
    created_at: dateTime,
    updated_at: dateTime,
    owned: { type: 'boolean' },
  },
} as const

const listQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    owned: { type: 'string', enum: ['true', 'false'] },
    name: NAME_SCHEMA,
    category: { type: 'string', minLength: 1, maxLength: 100 },
  },
} as const

const putBody = {
  type: 'object',
  minProperties: 1,
  additionalProperties: false,
  properties: {
    display_name: { type: 'string', minLength: 1, maxLength: 200 },
    description: { type: ['string', 'null'], maxLength: 2000 },
    category: { type: ['string', 'null'], minLength: 1, maxLength: 100 },
    suggested_packs: { type: ['string', 'null'], maxLength: 2000 },
    visibility: { type: 'string', enum: PACK_VISIBILITIES },
    image_ref: { type: 'string', minLength: 1, maxLength: 1024 },
  },
} as const

const createBody = {
  type: 'object',
  required: ['image_ref'],
  additionalProperties: false,
  properties: {
    image_ref: { type: 'string', minLength: 1, maxLength: 1024 },
    visibility: { type: 'string', enum: PACK_VISIBILITIES },
  },
} as const

/** The upload routes read their multipart body themselves; this describes it for the OpenAPI document. */
const uploadDoc = (withVisibility: boolean) => ({
  body: {
    content: {
      'multipart/form-data': {
        schema: {
          type: 'object', required: ['archive'],
          properties: {
            archive: { type: 'string', contentEncoding: 'binary', description: 'tar.gz of the pack directory (pack.yaml plus content files)' },
            ...(withVisibility ? { visibility: { type: 'string', enum: PACK_VISIBILITIES } } : {}),
          },
        },
      },
    },
  },
})

/** Largest file a file edit takes (docs/packs.md "Editing one file"); a larger body is 413. */
const FILE_EDIT_MAX_BYTES = 8 * 1024 * 1024

const fileEditDoc = {
  params: {
    type: 'object', required: ['id', 'path'],
    properties: { id: { type: 'string' }, path: { type: 'string', description: 'the file\'s path inside the pack, one URL segment (`/` sent as `%2F`); created when absent' } },
  },
  body: { content: { 'application/octet-stream': { schema: { type: 'string', contentEncoding: 'binary', description: 'the file\'s new content' } } } },
}

const cloneBody = { type: ['object', 'null'], additionalProperties: false, properties: { name: NAME_SCHEMA } } as const

/** The spec's Pack object: `owned` for the caller, and `org_id` only on the caller's own packs. */
export function packView(pack: PackRecord, orgId: string): Record<string, unknown> {
  const { manifest: _manifest, created_by: _createdBy, org_id, ...rest } = pack
  const owned = org_id === orgId
  return { ...rest, ...(owned ? { org_id } : {}), owned }
}

function actorOf(request: FastifyRequest): PackActor {
  const p = request.principal!
  return { orgId: p.org.id, userId: p.userId }
}

export async function packRoutes(app: FastifyInstance, deps: ServerDeps): Promise<void> {
  // deps is read at call time by the service (a part set after the app was built is seen).
  const packs = new PackService(deps)
  await app.register(multipart)
  contentRoutes(app, packs)
  recordRoutes(app, packs)
}

/** The routes that bring content in: from a registry image, an upload, a re-upload. */
function contentRoutes(app: FastifyInstance, packs: PackService): void {
  app.post<{ Body: { image_ref: string; visibility?: PackVisibility } }>(
    '/packs',
    { config: { permission: CAPS_WRITE }, schema: { body: createBody, response: { 201: packSchema } } },
    async (request, reply) => {
      const actor = actorOf(request)
      const pack = await packs.createFromImage(actor, request.body)
      reply.code(201)
      return packView(pack, actor.orgId)
    },
  )

  app.post(
    '/packs/upload',
    { config: { permission: CAPS_WRITE, openapi: uploadDoc(true) }, schema: { response: { 201: packSchema } } },
    async (request, reply) => {
      const actor = actorOf(request)
      const content = await beforeUpload(request, reply, () => packs.uploadContent(), async (c) => c)
      const { ingested, visibility } = await readUpload(packs, request, content, { visibility: true })
      const pack = await packs.create(actor, content, ingested, { visibility, image_origin: 'upload' })
      reply.code(201)
      return packView(pack, actor.orgId)
    },
  )

  app.put<{ Params: { id: string } }>(
    '/packs/:id/upload',
    { config: { permission: CAPS_WRITE, openapi: uploadDoc(false) }, schema: { params: idParams, response: { 200: packSchema } } },
    async (request, reply) => {
      const actor = actorOf(request)
      const { content, current } = await beforeUpload(request, reply, () => packs.uploadContent(), async (c) => ({
        content: c,
        current: await packs.reuploadTarget(actor.orgId, request.params.id),
      }))
      const { ingested } = await readUpload(packs, request, content, { visibility: false })
      return packView(await packs.reupload(actor, current, content, ingested), actor.orgId)
    },
  )

  // One file's new content as the raw body; anything but application/octet-stream is 415.
  app.addContentTypeParser('application/octet-stream', { parseAs: 'buffer', bodyLimit: FILE_EDIT_MAX_BYTES }, (_request, body, done) => done(null, body))
  app.put<{ Params: { id: string; path: string }; Body: Buffer | undefined }>(
    '/packs/:id/files/:path',
    { config: { permission: CAPS_WRITE, openapi: fileEditDoc }, schema: { response: { 200: packSchema } } },
    async (request) => {
      const actor = actorOf(request)
      if (request.body !== undefined && !Buffer.isBuffer(request.body)) throw apiError('unsupported_media_type', 'send the file\'s content as application/octet-stream')
      const data = request.body ?? Buffer.alloc(0)
      return packView(await packs.editFile(actor, request.params.id, request.params.path, data), actor.orgId)
    },
  )

}

/** Reading, changing, deleting and cloning pack records. */
function recordRoutes(app: FastifyInstance, packs: PackService): void {
  app.get<{ Querystring: { owned?: 'true' | 'false'; name?: string; category?: string } }>(
    '/packs',
    {
      config: { permission: ANY_MEMBER },
      schema: { querystring: listQuery, response: { 200: { type: 'object', required: ['packs'], properties: { packs: { type: 'array', items: packSchema } } } } },
    },
    async (request) => {
      const orgId = request.principal!.org.id
      return { packs: (await packs.list(orgId, request.query)).map((pk) => packView(pk, orgId)) }
    },
  )

  app.get<{ Params: { id: string } }>(
    '/packs/:id',
    { config: { permission: ANY_MEMBER }, schema: { params: idParams, response: { 200: packSchema } } },
    async (request) => {
      const orgId = request.principal!.org.id
      return packView(await packs.get(orgId, request.params.id), orgId)
    },
  )

  app.put<{ Params: { id: string }; Body: PackUpdate }>(
    '/packs/:id',
    { config: { permission: CAPS_WRITE }, schema: { params: idParams, body: putBody, response: { 200: packSchema } } },
    async (request) => {
      const actor = actorOf(request)
      return packView(await packs.update(actor, request.params.id, request.body), actor.orgId)
    },
  )

  app.delete<{ Params: { id: string } }>(
    '/packs/:id',
    { config: { permission: CAPS_WRITE }, schema: { params: idParams, response: { 200: statusOnly('deleted') } } },
    async (request) => {
      await packs.delete(actorOf(request), request.params.id)
      return { status: 'deleted' }
    },
  )

  app.post<{ Params: { id: string }; Body: { name?: string } | null | undefined }>(
    '/packs/:id/clone',
    { config: { permission: CAPS_WRITE }, schema: { params: idParams, body: cloneBody, response: { 201: packSchema } } },
    async (request, reply) => {
      const actor = actorOf(request)
      const pack = await packs.clone(actor, request.params.id, request.body?.name)
      reply.code(201)
      return packView(pack, actor.orgId)
    },
  )
}

/**
 * Runs an upload route's checks before the body is read (content store present, the target pack
 * writable). On a refusal the body is read and dropped first when it is within the upload limit,
 * so the client — still sending — receives the envelope rather than a reset connection; a larger
 * or unsized body is not read and the connection closes after the answer.
 */
async function beforeUpload<T>(request: FastifyRequest, reply: FastifyReply, contentStore: () => PackContent, check: (content: PackContent) => Promise<T>): Promise<T> {
  let content: PackContent | undefined
  try {
    content = contentStore()
    return await check(content)
  } catch (err) {
    // Refused before the body was read: read it to its end (up to the upload limit) so the client,
    // still sending, gets this answer instead of a broken pipe; a chunked body (a client streaming
    // with progress) is drained the same way. Past the limit the connection is closed instead.
    const length = Number(request.headers['content-length'])
    const max = (content?.limits.maxCompressedBytes ?? 0) + 64 * 1024
    const drained = request.raw.readableEnded || (!(Number.isFinite(length) && length > max) && (await drainUpTo(request.raw, max)))
    if (!drained) reply.header('connection', 'close')
    throw err
  }
}

/** Reads and discards a request body; false (and paused) once more than `max` bytes came. */
function drainUpTo(raw: FastifyRequest['raw'], max: number): Promise<boolean> {
  return new Promise((resolve) => {
    let seen = 0
    const done = (ok: boolean) => {
      raw.off('data', onData).off('end', onEnd).off('error', onFail).off('close', onFail)
      resolve(ok)
    }
    const onData = (chunk: Buffer) => {
      seen += chunk.length
      if (seen > max) {
        raw.pause()
        done(false)
      }
    }
    const onEnd = () => done(true)
    const onFail = () => done(false)
    raw.on('data', onData).once('end', onEnd).once('error', onFail).once('close', onFail)
    raw.resume()
  })
}

/**
 * Reads the multipart body (readParts, multipart-file.ts): one `archive` file part, streamed
 * straight into the content store, and, on create, an optional `visibility` field. Anything else
 * is a validation error. A refused body's ingested content is given up before the error is thrown.
 */
async function readUpload(packs: PackService, request: FastifyRequest, content: PackContent, opts: { visibility: boolean }): Promise<{ ingested: IngestedPack; visibility?: PackVisibility }> {
  if (!request.isMultipart()) throw apiError('unsupported_media_type', 'send multipart/form-data with the pack as an `archive` file part')
  const tooLarge = () => apiError('payload_too_large', `the pack archive is larger than ${content.limits.maxCompressedBytes} bytes (CORRAL_PACK_MAX_BYTES)`)
  let ingested: IngestedPack | undefined
  let visibility: PackVisibility | undefined
  let failure = await readParts(request, {
    // A little slack over the limit so the archive reader's own limit error fires first.
    limits: { files: 1, fields: 4, fieldSize: 1024, fileSize: content.limits.maxCompressedBytes + 64 * 1024 },
    file(part) {
      if (part.fieldname !== 'archive') throw fieldError(part.fieldname, 'is not a known part (send the pack as `archive`)')
      return {
        consume: async (stream) => {
          ingested = await content.ingest(stream)
        },
        cutShort,
        tooLarge,
      }
    },
    field(part) {
      if (part.fieldname !== 'visibility' || !opts.visibility) throw fieldError(part.fieldname, 'is not a known field')
      const v = String(part.value)
      if (!(PACK_VISIBILITIES as readonly string[]).includes(v)) throw fieldError('visibility', `must be one of ${PACK_VISIBILITIES.join(', ')}`)
      visibility = v as PackVisibility
    },
  })
  if (failure === undefined && !ingested) failure = fieldError('archive', 'is required (a tar.gz file part)')
  if (failure === undefined) return { ingested: ingested!, ...(visibility ? { visibility } : {}) }
  if (ingested) await packs.discard(content, ingested)
  const code = (failure as { code?: string }).code
  if (isTooLarge(failure)) throw tooLarge()
  if (code === 'FST_FILES_LIMIT') throw fieldError('archive', 'send exactly one archive')
  if (code === 'FST_FIELDS_LIMIT' || code === 'FST_PARTS_LIMIT') throw fieldError('body', 'has too many parts')
  if (failure instanceof CorralError) throw failure
  // Anything else the multipart parser raises is a malformed body, not a server fault; I/O errors
  // of the content store are CorralErrors or pass through the ingest as themselves.
  if (isMalformedBody(failure)) {
    throw fieldError('body', `is not valid multipart/form-data (${(failure as Error).message})`)
  }
  throw failure
}

function cutShort() {
  return apiError('validation_error', 'the upload ended in the middle of the archive part', { fields: { archive: 'ended before its end (truncated upload)' } })
}
