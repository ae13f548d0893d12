// A stand-in agent for controller tests (no model, no proxy): reads its task from
// $CORRAL_INBOX/tasks.json and acts on the description.
//   "write NAME TEXT"  writes NAME under the workspace dir and exits 0
//   "wait NAME TEXT"   waits for a `go` file in the workspace dir, then writes NAME and exits 0
//   "sleep"            waits until it is stopped
//   "crash"            exits 3 without doing anything
//   "link NAME TARGET" makes NAME (under the workspace dir) a symbolic link to TARGET and exits 0
import { readFileSync, writeFileSync, appendFileSync } from 'node:fs'
import { join } from 'node:path'

const dir = process.env.CORRAL_WORKSPACE_DIR
// Warm mode (CORRAL_TASK_SOURCE=http, a pool member's agent started ahead of its task): there is
// no proxy in these tests, so the test fetches the task with the controller's GET /tasks/next
// handler on the agent's behalf and drops it in task.json; the stand-in then goes on as usual.
const warm = process.env.CORRAL_TASK_SOURCE === 'http'
if (warm) {
  const { existsSync } = await import('node:fs')
  // Its start-up token, for tests that poll GET /tasks/next on its behalf (written before warm.pid).
  writeFileSync(join(dir, 'warm.token'), process.env.CORRAL_PROXY_TOKEN ?? '')
  writeFileSync(join(dir, 'warm.pid'), String(process.pid))
  while (!existsSync(join(dir, 'task.json'))) await new Promise((r) => setTimeout(r, 20))
}
const [task] = warm ? [JSON.parse(readFileSync(join(dir, 'task.json'), 'utf8'))] : JSON.parse(readFileSync(join(process.env.CORRAL_INBOX, 'tasks.json'), 'utf8'))
appendFileSync(join(dir, 'tasks.log'), `${task.id} ${task.description}\n`)
const [verb, name, ...rest] = task.description.split(' ')
if (verb === 'write') {
  writeFileSync(join(dir, name), rest.join(' '))
} else if (verb === 'wait') {
  const { existsSync } = await import('node:fs')
  const timer = setInterval(() => {
    if (!existsSync(join(dir, 'go'))) return
    clearInterval(timer)
    writeFileSync(join(dir, name), rest.join(' '))
  }, 30)
} else if (verb === 'sleep') {
  setInterval(() => {}, 1000)
} else if (verb === 'link') {
  const { symlinkSync } = await import('node:fs')
  symlinkSync(rest.join(' '), join(dir, name))
} else if (verb === 'crash') {
  process.exit(3)
}
