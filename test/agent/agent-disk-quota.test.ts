import { writeFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Agent } from '../../src/agent/agent-loop.js'
import { AnthropicClient } from '../../src/agent/anthropic.js'
import { createDispatcher } from '../../src/agent/config.js'
import { MemoryEventSink } from '../../src/agent/event-sink.js'
import { ListTaskSource } from '../../src/agent/task-source.js'
import { Toolbox } from '../../src/agent/tools.js'
import { type Script, startFakeAnthropic } from './fake-model.js'

// The agent loop with a real Toolbox on a real directory and a real shell; the model is the fake
// streaming server. A quota of 1 MB is small enough for `head -c` to cross it.
const QUOTA = 1024 * 1024
let dir: string
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'corral-agent-quota-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

async function run(script: Script, root: string) {
  const provider = await startFakeAnthropic(script)
  const dispatcher = createDispatcher({})
  const sink = new MemoryEventSink()
  const agent = new Agent({
    model: new AnthropicClient({ baseUrl: provider.url, model: 'claude-test', dispatcher }),
    tools: new Toolbox(root, { diskQuotaBytes: QUOTA }),
    sink,
    backoff: async () => {},
  })
  try {
    const [outcome] = await agent.runSession(new ListTaskSource([{ id: 'task_q', description: 'Fill the disk' }]))
    return { outcome: outcome!, sink, requests: provider.requests }
  } finally {
    await dispatcher.close()
    await provider.close()
  }
}

describe('the disk quota in the agent loop', () => {
  it('a shell command that leaves /data over the quota fails the task; later calls of the same turn are not run', async () => {
    const root = await mkdtemp(join(dir, 'ws-'))
    const { outcome, sink, requests } = await run(() => ({
      tools: [
        { name: 'run_command', input: { command: 'head -c 3000000 /dev/urandom > big.bin' } },
        { name: 'write_file', input: { path: 'never.txt', content: 'x' } },
      ],
    }), root)
    expect(outcome).toMatchObject({ status: 'failed', reason: 'disk_quota_exceeded', iterations: 1 })
    expect(outcome.summary).toMatch(/over its disk quota of 1\.0 MB/)
    expect(requests).toHaveLength(1)
    expect(requests[0]!.body.system).toContain(`${root} has a disk quota of 1 MB: a task that leaves it larger fails.`)
    expect(sink.events.filter((e) => e.type === 'file_change').map((e) => [e.path, e.action])).toEqual([['big.bin', 'created']])
    expect(sink.events.filter((e) => e.type === 'tool_call')).toHaveLength(1)
    expect(sink.events.find((e) => e.type === 'task_end')).toMatchObject({ status: 'failed', reason: 'disk_quota_exceeded' })
  })

  it('a task that would complete is failed when /data ends over the quota (filled after its last tool call)', async () => {
    const root = await mkdtemp(join(dir, 'ws-'))
    const { outcome, sink } = await run((_body, index) => {
      if (index === 0) return { tools: [{ name: 'run_command', input: { command: 'true' } }] }
      // Something outside the tools (a background job, say) fills /data before the model finishes.
      writeFileSync(join(root, 'late.bin'), Buffer.alloc(3_000_000, 1))
      return { tools: [{ name: 'finish', input: { summary: 'done' } }] }
    }, root)
    expect(outcome).toMatchObject({ status: 'failed', reason: 'disk_quota_exceeded' })
    expect(sink.events.find((e) => e.type === 'task_end')).toMatchObject({ status: 'failed', reason: 'disk_quota_exceeded' })
  })

  it('under the quota a task completes as usual', async () => {
    const root = await mkdtemp(join(dir, 'ws-'))
    const { outcome } = await run((_body, index) => index === 0
      ? { tools: [{ name: 'run_command', input: { command: 'head -c 10000 /dev/urandom > small.bin' } }] }
      : { tools: [{ name: 'finish', input: { summary: 'done' } }] }, root)
    expect(outcome).toMatchObject({ status: 'completed', summary: 'done' })
  })
})
