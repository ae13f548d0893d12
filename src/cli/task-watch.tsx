// `corral task submit --wait` and `corral task watch`: follow a task through the workspace's
// activity until it ends. People get one line per event on stderr — each policy decision with its
// outcome (allow, or deny and the reason), destination, capability and debits — and, on a
// terminal only, a status line below them with a spinner and the elapsed time (ink). When stderr
// is not a terminal the lines are written plainly: no cursor movement, no spinner. Colour follows
// ./output.ts (never with NO_COLOR). `--json` gets NDJSON on stdout (each event, then the task).
// Events that happened before the stream connected are read from the workspace's audit log first,
// then the stream resumes after the last one (Last-Event-ID), so nothing is missed or shown twice.
import { Box, Static, Text, render } from 'ink'
import React, { useEffect, useState } from 'react'
import type { AuditEvent } from '../contract/index.js'
import { followActivity, type CorralClient, workspacesApi, type TaskRecord } from '../client/index.js'
import { detailSummary } from './audit-render.js'
import { colorEnabled, paint } from './output.js'

export interface WatchOptions {
  taskId: string
  workspaceId: string
  json: boolean
  signal?: AbortSignal
  /** Where people's view goes (default process.stderr). */
  stream?: NodeJS.WriteStream
}

/** Resolves with the task once it is terminal. */
export async function watchTask(client: CorralClient, o: WatchOptions): Promise<TaskRecord> {
  if (o.json) return follow(client, o, (e) => process.stdout.write(JSON.stringify(e) + '\n'))
  const stream = o.stream ?? process.stderr
  const started = Date.now()
  if (!stream.isTTY) {
    const task = await follow(client, o, (e) => stream.write(watchLine(e, stream) + '\n'))
    stream.write(endLine(task, Date.now() - started, stream) + '\n')
    return task
  }
  const feed = new Feed()
  const view = render(<Watch feed={feed} taskId={o.taskId} workspaceId={o.workspaceId} started={started} stream={stream} />, { stdout: stream, exitOnCtrlC: false, patchConsole: false })
  try {
    const task = await follow(client, o, (e) => feed.push(e))
    feed.finish(task)
    await new Promise((r) => setTimeout(r, 50)) // let the last frame render
    return task
  } finally {
    view.unmount()
  }
}

async function follow(client: CorralClient, o: WatchOptions, onEvent: (e: AuditEvent) => void): Promise<TaskRecord> {
  const api = workspacesApi(client)
  const stop = new AbortController()
  o.signal?.addEventListener('abort', () => stop.abort(), { once: true })
  let last: string | undefined
  let ended = false
  // The view starts at the task's own task_submitted (a follow-up's workspace has older history)
  // and shows the task's events plus the workspace's lifecycle events in between.
  let started = false
  const see = (e: AuditEvent) => {
    if (ended) return // the view ends with the task's task_completed
    last = e.id
    if (e.task_id === o.taskId) started = true
    if (!started) return
    if (e.task_id === o.taskId || !e.task_id) onEvent(e)
    if (e.event_type === 'task_completed' && e.task_id === o.taskId) {
      ended = true
      stop.abort()
    }
  }
  for await (const page of client.auditPages({ order: 'asc', limit: 1000 }, { workspaceId: o.workspaceId })) {
    for (const e of page.events) see(e)
    if (ended) break
  }
  if (!ended && !stop.signal.aborted) {
    await followActivity(client, { workspaceId: o.workspaceId, ...(last ? { lastEventId: last } : {}), anchor: !last, signal: stop.signal, onEvent: see })
  }
  return api.getTask(o.taskId)
}

/** `k=v` of a decision's debits, e.g. `debits output_tokens=120 requests=1`. */
function debits(e: AuditEvent): string {
  const entries = Object.entries(e.debits ?? {})
  return entries.length ? `debits ${entries.map(([k, v]) => `${k}=${v}`).join(' ')}` : ''
}

/** One line for one event: a policy decision names its outcome, destination, capability and debits. */
export function watchLine(e: AuditEvent, stream: NodeJS.WriteStream = process.stderr): string {
  const time = paint('gray', e.timestamp.slice(11, 19), stream)
  if (e.event_type === 'policy_decision') {
    const deny = e.decision === 'deny'
    const outcome = paint(deny ? 'red' : 'green', deny ? `deny ${e.reason ?? ''}`.trim() : (e.decision ?? 'allow'), stream)
    const where = [e.method, `${e.destination ?? ''}${e.path ?? ''}`].filter(Boolean).join(' ')
    const parts = [time, outcome, where, e.capability_name ? `cap=${e.capability_name}` : '', debits(e), e.latency_ms !== undefined ? `${e.latency_ms} ms` : '']
    return parts.filter(Boolean).join('  ')
  }
  // An agent event's detail repeats its type and time; the line shows them once.
  const { type: _t, timestamp: _ts, ...rest } = e.detail ?? {}
  const detail = detailSummary(rest, 100)
  return [time, paint('bold', e.event_type, stream), detail ? paint('dim', detail, stream) : ''].filter(Boolean).join('  ')
}

function endLine(t: TaskRecord, watchedMs: number, stream: NodeJS.WriteStream): string {
  // The task's own duration when the server has it (a replayed task was not watched live).
  const took = t.finished_at ? Date.parse(t.finished_at) - Date.parse(t.started_at ?? t.created_at) : NaN
  const elapsedMs = Number.isFinite(took) && took >= 0 ? took : watchedMs
  const text = `Task ${t.id} ${t.status}${t.reason ? ` (${t.reason})` : ''}${t.summary ? `: ${t.summary}` : ''} after ${elapsed(elapsedMs)}`
  return paint(t.status === 'completed' ? 'green' : 'red', text, stream)
}

function elapsed(ms: number): string {
  const s = Math.floor(ms / 1000)
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`
}

class Feed {
  events: AuditEvent[] = []
  task: TaskRecord | undefined
  #listeners = new Set<() => void>()
  push(e: AuditEvent): void {
    this.events = [...this.events, e]
    this.#emit()
  }
  finish(t: TaskRecord): void {
    this.task = t
    this.#emit()
  }
  subscribe(fn: () => void): () => void {
    this.#listeners.add(fn)
    return () => this.#listeners.delete(fn)
  }
  #emit(): void {
    for (const fn of this.#listeners) fn()
  }
}

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏']

function Watch({ feed, taskId, workspaceId, started, stream }: { feed: Feed; taskId: string; workspaceId: string; started: number; stream: NodeJS.WriteStream }) {
  const [, tick] = useState(0)
  useEffect(() => feed.subscribe(() => tick((n) => n + 1)), [feed])
  useEffect(() => {
    const timer = setInterval(() => tick((n) => n + 1), 100)
    return () => clearInterval(timer)
  }, [])
  const now = Date.now() - started
  const current = [...feed.events].reverse().find((e) => e.actor === 'agent')
  const t = feed.task
  const status = `${FRAMES[Math.floor(now / 100) % FRAMES.length]} ${elapsed(now)}  ${taskId} on ${workspaceId}: ${current ? current.event_type : 'waiting for the workspace'}`
  return (
    <Box flexDirection="column">
      <Static items={feed.events}>{(e) => <Text key={e.id}>{watchLine(e, stream)}</Text>}</Static>
      <Text>{t ? endLine(t, now, stream) : colorEnabled(stream) ? paint('cyan', status, stream) : status}</Text>
    </Box>
  )
}
