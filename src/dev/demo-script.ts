// The demo model's script: every task goes the same three turns, so a newcomer sees the reference
// agent use its tools under the policy without a real model. It reads the conversation in either
// wire format (Anthropic Messages or OpenAI Chat Completions) and counts the assistant turns since
// the task's prompt:
//   0 → write `hello.md` (the task's words in it) with write_file
//   1 → run a command that lists the workspace and counts the file's words
//   2 → finish with a summary
import { cliScript } from './cli-script.js'
import type { Script, ScriptedReply } from './fake-model.js'

export const DEMO_FILE = 'hello.md'

/** Token counts the demo reports, so the role's SSE counter has something to meter. */
const USAGE = [{ input: 412, output: 38 }, { input: 530, output: 24 }, { input: 611, output: 17 }] as const

export function demoScript(body: any): ScriptedReply {
  const messages: any[] = Array.isArray(body?.messages) ? body.messages : []
  const { turn, prompt } = position(messages)
  if (turn === 0) {
    const content = `# ${firstLine(prompt) || 'Hello from corral'}\n\nWritten by the reference agent, driven by corral dev's scripted fake model,\nthrough the policy proxy. Every model call it made is a policy_decision row in the audit log.\n`
    return { text: `I will write ${DEMO_FILE} for this task.`, tools: [{ name: 'write_file', input: { path: DEMO_FILE, content } }], usage: USAGE[0] }
  }
  if (turn === 1) {
    return { text: 'Now I check what is in the workspace.', tools: [{ name: 'run_command', input: { command: `ls -l && wc -w ${DEMO_FILE}` } }], usage: USAGE[1] }
  }
  return {
    text: 'Done.',
    tools: [{ name: 'finish', input: { summary: `Wrote ${DEMO_FILE} and listed the workspace (a scripted demo model, not a real one).` } }],
    usage: USAGE[2],
  }
}

/** The assistant turns after the last message that carries the task's words, and those words. */
function position(messages: any[]): { turn: number; prompt: string } {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]
    if (m?.role !== 'user') continue
    const text = textOf(m.content)
    if (text === '') continue
    return { turn: messages.slice(i + 1).filter((x) => x?.role === 'assistant').length, prompt: text }
  }
  return { turn: 0, prompt: '' }
}

/** The text of a user message: a string (OpenAI) or the text blocks of a content array (both). */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  return content.filter((b) => b?.type === 'text' && typeof b.text === 'string').map((b) => b.text as string).join('\n')
}

function firstLine(text: string): string {
  return (text.split('\n')[0] ?? '').trim().slice(0, 120)
}

/**
 * `corral dev`'s model: the demo script for the reference agent (the request offers its `finish`
 * tool), the agent CLIs' script (./cli-script.ts) for everything else.
 */
export function devScript(): Script {
  const cli = cliScript()
  return (body, index, ctx) => (offersFinish(body) ? demoScript(body) : cli(body, index, ctx))
}

function offersFinish(body: any): boolean {
  const tools: any[] = Array.isArray(body?.tools) ? body.tools : []
  return tools.some((t) => (t?.name ?? t?.function?.name) === 'finish')
}
