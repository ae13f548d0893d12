// The end of `task submit --wait` and `task watch`: follow a task to its end (./task-watch.tsx,
// loaded only here: ink and React cost start-up time), Ctrl-C stops watching but not the task.
// Under --json the final task follows the event NDJSON on stdout. Exit 1 unless it completed.
import type { CorralClient, TaskRecord } from '../client/index.js'
import { FindingsExit } from './errors.js'

export async function followTaskToEnd(client: CorralClient, ids: { taskId: string; workspaceId: string }, json: boolean): Promise<TaskRecord> {
  const stop = new AbortController()
  const onSignal = () => stop.abort()
  process.once('SIGINT', onSignal)
  let task: TaskRecord
  try {
    const { watchTask } = await import('./task-watch.js')
    task = await watchTask(client, { ...ids, json, signal: stop.signal })
  } finally {
    process.off('SIGINT', onSignal)
  }
  if (json) process.stdout.write(JSON.stringify(task) + '\n')
  if (task.status !== 'completed' && !stop.signal.aborted) throw new FindingsExit()
  return task
}
