// `corral task submit --wait`: follows the workspace's activity stream until the task ends. People
// get a live view (ink): finished event lines scroll above a status line that shows what the agent
// is doing now; `--json` gets NDJSON (each event, then the final task). Events that happened before
// the stream connected are read from the workspace's audit log first, then the stream resumes
// after the last one (Last-Event-ID), so nothing is missed or shown twice.
import { Box, Static, Text, render } from 'ink'
import React, { useEffect, useState } from 'react'
import type { AuditEvent } from '../contract/index.js'
import { followActivity, type CorralClient, workspacesApi, type TaskRecord } from '../client/index.js'
import { detailSummary } from './audit-render.js'

export interface WatchOptions {
  taskId: string
  workspaceId: string
  json: boolean
  signal?: AbortSignal
}

/** Resolves with the task once it is terminal. */
export async function watchTask(client: CorralClient, o: WatchOptions): Promise<TaskRecord> {
  if (o.json) {
    return follow(client, o, (e) => process.stdout.write(JSON.stringify(e) + '\n'))
  }
  const feed = new Feed()
  const view = render(<Watch feed={feed} taskId={o.taskId} workspaceId={o.workspaceId} />, { stdout: process.stderr, exitOnCtrlC: false })
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
  if (!ended) {
    await followActivity(client, { workspaceId: o.workspaceId, ...(last ? { lastEventId: last } : {}), anchor: !last, signal: stop.signal, onEvent: see })
  }
  return api.getTask(o.taskId)
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

function Watch({ feed, taskId, workspaceId }: { feed: Feed; taskId: string; workspaceId: string }) {
  const [, tick] = useState(0)
  useEffect(() => feed.subscribe(() => tick((n) => n + 1)), [feed])
  const current = [...feed.events].reverse().find((e) => e.actor === 'agent')
  const t = feed.task
  return (
    <Box flexDirection="column">
      <Static items={feed.events}>
        {(e) => (
          <Text key={e.id}>
            <Text dimColor>{e.timestamp.slice(11, 19)} </Text>
            <Text bold>{e.event_type}</Text>
            <Text dimColor> {detailSummary(e.detail, 100)}</Text>
          </Text>
        )}
      </Static>
      {t ? (
        <Text color={t.status === 'completed' ? 'green' : 'red'}>
          Task {taskId} {t.status}{t.reason ? ` (${t.reason})` : ''}{t.summary ? `: ${t.summary}` : ''}
        </Text>
      ) : (
        <Text color="cyan">
          ⧗ {taskId} on {workspaceId}: {current ? current.event_type : 'waiting for the workspace'}
        </Text>
      )}
    </Box>
  )
}
