// Task uploads (`file` parts of POST /v1/tasks and POST /v1/workspaces/{id}/tasks) over a real
// socket, with bodies that end in the middle of a file part: the request is answered with the
// 400 envelope when the client is still there, or dropped when it is not — never left hanging —
// and no staged upload file, task or workspace is left behind. Real app, real SQLite store, the
// workspace controller with the `process` runtime and the stand-in agent.
import { randomBytes } from 'node:crypto'
import { existsSync, readdirSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { proxyTables } from '../../src/store/proxy-tables.js'
import { controllerRig, waitFor, type ControllerRig } from '../workspaces/harness.js'
import { createHarness, type Harness } from './harness.js'

const BOUNDARY = 'corraltaskboundary'

describe('task uploads over a socket', () => {
  let h: Harness
  let rig: ControllerRig
  let port: number
  let org: Awaited<ReturnType<Harness['newOrg']>>
  let roleId: string
  let idleWorkspace: string

  beforeAll(async () => {
    h = await createHarness()
    rig = await controllerRig(h.store)
    h.deps.lifecycle = { available: true, controller: rig.controller }
    h.deps.workspaces = { get: async (o, id) => { const w = await rig.controller.get(o, id); return w && { id: w.id, created_by: w.created_by } } }
    h.deps.config.taskRateLimit = false
    await h.app.listen({ host: '127.0.0.1', port: 0 })
    port = (h.app.server.address() as { port: number }).port
    org = await h.newOrg()
    const t = proxyTables(h.store.db).workspaces
    roleId = await t.createRole(org.orgId, { name: 'coder', provider_id: await t.createProvider(org.orgId, { name: 'prov' }) })
    // A workspace that exists but never runs: the follow-up route reads its body before submitting.
    idleWorkspace = await rig.store.workspaces.create(org.orgId, { role_id: roleId, created_by: org.ownerId, created_by_user_id: org.ownerId })
  })
  afterAll(async () => {
    await rig.close()
    await h.close()
  })

  const stagingRoot = () => join(rig.root, 'uploads')
  const staged = () => (existsSync(stagingRoot()) ? readdirSync(stagingRoot()) : [])
  const workspaceCount = async () => (await h.inject('GET', '/v1/workspaces', { token: org.ownerKey })).body.workspaces.length as number
  const followUps = async () => (await h.inject('GET', `/v1/workspaces/${idleWorkspace}/tasks`, { token: org.ownerKey })).body.tasks.length as number

  const filePart = (name: string) => `--${BOUNDARY}\r\ncontent-disposition: form-data; name="file"; filename="${name}"\r\ncontent-type: application/octet-stream\r\n\r\n`
  const fieldParts = (fields: Record<string, string>) => Object.entries(fields).map(([k, v]) => `--${BOUNDARY}\r\ncontent-disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`).join('')

  /** The fields, then one `file` part whose content is `file` (cut or not), then optionally the closing boundary. */
  function body(fields: Record<string, string>, file: Buffer, close: boolean): Buffer {
    return Buffer.concat([Buffer.from(fieldParts(fields) + filePart('input.bin')), file, Buffer.from(close ? `\r\n--${BOUNDARY}--\r\n` : '')])
  }

  /** Opens a connection and sends the request head (with `length` as content-length) and `bytes`. */
  async function send(path: string, length: number, bytes: Buffer): Promise<{ socket: Socket; response: Promise<string> }> {
    const socket = connect(port, '127.0.0.1')
    await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject))
    const chunks: Buffer[] = []
    socket.on('data', (c: Buffer) => chunks.push(c))
    // Resolves with whatever the server wrote once the connection is over (closed by either side).
    const response = new Promise<string>((resolve) => {
      socket.once('close', () => resolve(Buffer.concat(chunks).toString('utf8')))
      socket.on('error', () => {})
    })
    socket.write(`POST ${path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\nauthorization: Bearer ${org.ownerKey}\r\ncontent-type: multipart/form-data; boundary=${BOUNDARY}\r\ncontent-length: ${length}\r\n\r\n`)
    socket.write(bytes)
    return { socket, response }
  }

  /** The first response on the socket, once all of it (head and content-length bytes) has arrived. */
  function answerOf(socket: Socket): Promise<string> {
    return new Promise((resolve) => {
      let raw = Buffer.alloc(0)
      const onData = (c: Buffer) => {
        raw = Buffer.concat([raw, c])
        const end = raw.indexOf('\r\n\r\n')
        const length = Number(/content-length: (\d+)/i.exec(raw.subarray(0, end).toString())?.[1])
        if (end >= 0 && raw.length >= end + 4 + length) {
          socket.off('data', onData)
          resolve(raw.toString('utf8'))
        }
      }
      socket.on('data', onData)
    })
  }

  /** The response, or a failure naming the hang when none came (and the connection stayed open). */
  async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<never>((_r, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms: ${what}`)), ms)))
    try {
      return await Promise.race([p, timeout])
    } finally {
      clearTimeout(timer)
    }
  }

  function envelope(raw: string): { status: number; error: { code: string; message: string; details?: { fields?: Record<string, string> } } } {
    const status = Number(/^HTTP\/1\.1 (\d+)/.exec(raw)?.[1])
    return { status, error: (JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)) as { error: never }).error }
  }

  const routes = [
    { name: 'POST /v1/tasks', path: () => '/v1/tasks', fields: () => ({ role_id: roleId, description: 'cut' }), created: workspaceCount },
    { name: 'POST /v1/workspaces/{id}/tasks', path: () => `/v1/workspaces/${idleWorkspace}/tasks`, fields: () => ({ description: 'cut' }), created: followUps },
  ]

  it('accepts a whole upload sent the same way (the raw request is well formed)', async () => {
    const file = randomBytes(256 * 1024)
    const whole = body({ role_id: roleId, description: 'sleep' }, file, true)
    const { response } = await send('/v1/tasks', whole.length, whole)
    const raw = await within(response, 10_000, 'whole upload')
    expect(raw).toMatch(/^HTTP\/1\.1 202/)
    const { workspace_id } = JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)) as { workspace_id: string }
    await waitFor(async () => (await rig.store.workspaces.byId(workspace_id))?.state === 'busy', 'the agent started')
    await rig.controller.stop(org.orgId, workspace_id)
    expect(staged()).toEqual([])
  })

  it('refuses a file name over 255 bytes or holding NUL on `file`, and keeps nothing', async () => {
    const before = await workspaceCount()
    const named = (disposition: string) => Buffer.concat([
      Buffer.from(`${fieldParts({ role_id: roleId, description: 'bad name' })}--${BOUNDARY}\r\ncontent-disposition: form-data; name="file"; ${disposition}\r\ncontent-type: application/octet-stream\r\n\r\nbody\r\n--${BOUNDARY}--\r\n`),
    ])
    for (const disposition of [`filename="${'é'.repeat(128)}"`, `filename="${'x'.repeat(256)}"`, "filename*=utf-8''a%00b", 'filename="a\u0000b"']) {
      const whole = named(disposition)
      const { response } = await send('/v1/tasks', whole.length, whole)
      const res = envelope(await within(response, 5_000, disposition.slice(0, 20)))
      expect([res.status, res.error.code], disposition.slice(0, 20)).toEqual([400, 'validation_error'])
      expect(res.error.details?.fields).toHaveProperty('file')
    }
    expect(staged()).toEqual([])
    expect(await workspaceCount()).toBe(before)
  })

  it('removes the first file when a later one is cut short', async () => {
    const before = await workspaceCount()
    const cut = Buffer.concat([
      Buffer.from(fieldParts({ role_id: roleId, description: 'two files' }) + filePart('first.txt')), Buffer.from('whole\r\n'),
      Buffer.from(filePart('second.bin')), randomBytes(64 * 1024),
    ])
    const { response } = await send('/v1/tasks', cut.length, cut)
    const res = envelope(await within(response, 5_000, 'second file cut'))
    expect([res.status, res.error.code]).toEqual([400, 'validation_error'])
    expect(res.error.message).toMatch(/second\.bin/)
    expect(staged()).toEqual([])
    expect(await workspaceCount()).toBe(before)
  })

  it('answers 413 for more than 20 files, keeping nothing', async () => {
    const files = Array.from({ length: 21 }, (_, i) => `${filePart(`f${i}.txt`)}${i}\r\n`).join('')
    const whole = Buffer.from(`${fieldParts({ role_id: roleId, description: 'many' })}${files}--${BOUNDARY}--\r\n`)
    const { response } = await send('/v1/tasks', whole.length, whole)
    const res = envelope(await within(response, 5_000, 'too many files'))
    expect([res.status, res.error.code]).toEqual([413, 'payload_too_large'])
    expect(staged()).toEqual([])
  })

  it('answers 413 once a file passes 100 MiB, without waiting for the rest of the body, and keeps nothing', async () => {
    const before = await workspaceCount()
    const limit = 100 * 1024 * 1024
    const head = Buffer.from(fieldParts({ role_id: roleId, description: 'big' }) + filePart('big.bin'))
    const { socket } = await send('/v1/tasks', head.length + 2 * limit, head)
    const answer = answerOf(socket)
    // Just past the limit, then the client pauses: the answer must not wait for the body's end.
    const chunk = Buffer.alloc(1024 * 1024)
    for (let sent = 0; sent <= limit; sent += chunk.length) {
      if (!socket.write(chunk)) await new Promise((resolve) => socket.once('drain', resolve))
    }
    const res = envelope(await within(answer, 10_000, 'over-limit file'))
    expect([res.status, res.error.code]).toEqual([413, 'payload_too_large'])
    expect(res.error.message).toMatch(/big\.bin/)
    await waitFor(async () => staged().length === 0, 'the staged upload removed', 5_000)
    socket.destroy()
    expect(await workspaceCount()).toBe(before)
  })

  it('removes staged files when the task is refused after the body was read', async () => {
    const unknownRole = body({ role_name: 'nobody', description: 'x' }, Buffer.from('data'), true)
    const r1 = await send('/v1/tasks', unknownRole.length, unknownRole)
    expect(envelope(await within(r1.response, 5_000, 'unknown role')).status).toBe(404)
    expect(staged()).toEqual([])
    const archived = await rig.store.workspaces.create(org.orgId, { role_id: roleId, created_by: org.ownerId, created_by_user_id: org.ownerId })
    await h.store.db.updateTable('workspaces' as never).set({ state: 'archived' } as never).where('id' as never, '=', archived as never).execute()
    const followUp = body({ description: 'x' }, Buffer.from('data'), true)
    const r2 = await send(`/v1/workspaces/${archived}/tasks`, followUp.length, followUp)
    expect(envelope(await within(r2.response, 5_000, 'archived workspace')).error.code).toBe('workspace_archived')
    expect(staged()).toEqual([])
  })

  for (const route of routes) describe(route.name, () => {
    it('answers a body that ends inside a file part with the 400 envelope, and keeps nothing', async () => {
      const before = await route.created()
      // The HTTP body is complete (content-length matches), the multipart body is not.
      const cut = body(route.fields(), randomBytes(200 * 1024), false)
      const { response } = await send(route.path(), cut.length, cut)
      const res = envelope(await within(response, 5_000, 'body cut inside the file part'))
      expect(res.status).toBe(400)
      expect(res.error.code).toBe('validation_error')
      expect(res.error.details?.fields).toHaveProperty('file')
      expect(staged()).toEqual([])
      expect(await route.created()).toBe(before)
    })

    it('drops a request whose client stops sending mid-file (half-close), and keeps nothing', async () => {
      const before = await route.created()
      const whole = body(route.fields(), randomBytes(512 * 1024), true)
      const { socket, response } = await send(route.path(), whole.length, whole.subarray(0, whole.length / 2))
      await waitFor(async () => staged().length > 0, 'the upload was being staged')
      socket.end()
      await within(response, 5_000, 'half-closed mid-file')
      await waitFor(async () => staged().length === 0, 'the staged upload removed', 5_000)
      expect(await route.created()).toBe(before)
    })

    it('cleans up after a client that disconnects mid-file, and keeps serving', async () => {
      const before = await route.created()
      const whole = body(route.fields(), randomBytes(512 * 1024), true)
      const { socket, response } = await send(route.path(), whole.length, whole.subarray(0, whole.length / 2))
      await waitFor(async () => staged().length > 0, 'the upload was being staged')
      socket.destroy()
      await response
      await waitFor(async () => staged().length === 0, 'the staged upload removed', 5_000)
      expect(await route.created()).toBe(before)
      // The server still answers: a malformed body is a validation error, not a stuck connection.
      const bad = body(route.fields(), Buffer.from('x'), false)
      const next = await send(route.path(), bad.length, bad)
      expect(envelope(await within(next.response, 5_000, 'next request')).status).toBe(400)
    })
  })
})
