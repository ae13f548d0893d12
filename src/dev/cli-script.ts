// The agent CLIs' script: what the fake model answers Claude Code, Codex, Gemini CLI and OpenCode
// (and any client of the four APIs), steered by words in the task's prompt. It reads the
// conversation in the request's own format, finds the prompt (the last user message that is not a
// tool result) and counts the tool results since:
//   0 → write `hello.md` with the CLI's own file tool (Write, write, write_file, an apply_patch
//       tool; Codex: an `apply_patch` invocation through its command tool),
//   1 → run a command with its shell tool (Bash, bash, run_shell_command, exec_command, shell),
//   2 → a final answer naming how many tool results came before the prompt (a resumed session
//       has some, a fresh one none).
// Tool arguments follow the schema the request declares for the tool. A request that offers no
// tools (a title, a routing check) gets a short text, or a value of the JSON schema it asks for.
// `fake:<word>` in the prompt steers it (docs/dev.md "The fake model"):
//   fake:text  answer in text, no tools     fake:sleep[-N]  the command is `sleep N` (300; to cancel)
//   fake:429   429 with Retry-After: 1      fake:500    500            fake:cut  a stream cut part-way
//   fake:400   400 (a request the API refuses: not retried by any CLI)
//   fake:429-once, fake:500-once, fake:cut-once, fake:400-once: that failure for the prompt's first request only.
import { requestedSchema, valueFor } from './fake-model/gemini.js'
import { inputItems } from './fake-model/openai-responses.js'
import type { Script, ScriptContext, ScriptedReply, WireFormat } from './fake-model/types.js'

export const CLI_FILE = 'hello.md'

/** A tool the request offers: its name and the JSON schema of its arguments. */
interface OfferedTool {
  name: string
  schema: any
}

export interface Conversation {
  /** The prompt's text (all its text parts). */
  prompt: string
  /** Tool results after the prompt. */
  after: number
  /** Tool results before it: a resumed session's earlier work. */
  before: number
  tools: OfferedTool[]
}

const WRITE_TOOLS = ['Write', 'write', 'write_file', 'create_file']
const SHELL_TOOLS = ['Bash', 'bash', 'run_shell_command', 'exec_command', 'shell', 'run_command', 'container.exec']
const USAGE = [{ input: 1200, output: 60 }, { input: 1400, output: 40 }, { input: 1500, output: 30 }] as const

export function cliScript(): Script {
  const failedOnce = new Set<string>()
  return (body, _index, ctx) => {
    const conv = readConversation(ctx.api, body)
    if (conv.tools.length === 0) return sideAnswer(body, conv)
    const word = /\bfake:([a-z0-9-]+)/.exec(conv.prompt)?.[1] ?? 'work'
    const failure = /^(400|429|500|cut)(-once)?$/.exec(word)
    if (failure) {
      const key = `${ctx.api}\u0000${conv.prompt}\u0000${conv.before}`
      if (!failure[2] || !failedOnce.has(key)) {
        if (failure[2]) failedOnce.add(key)
        if (failure[1] === 'cut') return { text: 'This answer will be cut off before it ends, by design of the fake model.', cut: true }
        return failure[1] === '429' ? { status: 429, retryAfter: 1 } : { status: Number(failure[1]) }
      }
    }
    if (word === 'text') return { text: `A text answer from the fake model (${conv.before} tool results before this prompt).`, usage: USAGE[2] }
    const sleep = /^sleep(?:-(\d{1,5}))?$/.exec(word)
    return work(conv, body, ctx, sleep ? `sleep ${sleep[1] ?? '300'}` : undefined)
  }
}

function work(conv: Conversation, body: any, ctx: ScriptContext, sleep: string | undefined): ScriptedReply {
  const cwd = workingDirectory(body)
  const writeTool = conv.tools.find((t) => WRITE_TOOLS.includes(t.name))
  const shellTool = conv.tools.find((t) => SHELL_TOOLS.includes(t.name))
  if (conv.after === 0) {
    const content = `# ${title(conv.prompt)}\n\nWritten by an agent CLI driven by corral's fake model (${ctx.api}).\n`
    if (writeTool) {
      const file = cwd ? `${cwd}/${CLI_FILE}` : CLI_FILE
      return { text: `I will write ${CLI_FILE}.`, tools: [{ name: writeTool.name, input: argsFor(writeTool, { path: file, content }) }], usage: USAGE[0] }
    }
    const patch = `*** Begin Patch\n*** Add File: ${CLI_FILE}\n${content.split('\n').slice(0, -1).map((l) => `+${l}`).join('\n')}\n*** End Patch`
    const patchTool = conv.tools.find((t) => t.name === 'apply_patch')
    if (patchTool) {
      const props = patchTool.schema?.properties ?? {}
      const key = ['patchText', 'patch', 'input'].find((k) => k in props) ?? 'input'
      return { text: `I will write ${CLI_FILE}.`, tools: [{ name: patchTool.name, input: { [key]: patch } }], usage: USAGE[0] }
    }
    if (shellTool) {
      // Codex applies a patch itself when a command invokes apply_patch.
      const command = `apply_patch <<'PATCH'\n${patch}\nPATCH`
      return { text: `I will write ${CLI_FILE}.`, tools: [{ name: shellTool.name, input: argsFor(shellTool, { command, cwd }) }], usage: USAGE[0] }
    }
  }
  if (conv.after <= 1 && shellTool) {
    const command = sleep ?? `ls && wc -w ${CLI_FILE}`
    return { text: 'Now I check the workspace.', tools: [{ name: shellTool.name, input: argsFor(shellTool, { command, cwd }) }], usage: USAGE[1] }
  }
  return { text: `Done: wrote ${CLI_FILE} and ran a command. Tool results before this prompt: ${conv.before}.`, usage: USAGE[2] }
}

/** A request without tools: a title or summary asks for text, a JSON-schema request for a value of it. */
function sideAnswer(body: any, conv: Conversation): ScriptedReply {
  const schema = requestedSchema(body)
  if (schema !== undefined) return { text: JSON.stringify(valueFor(schema)), usage: { input: 200, output: 10 } }
  return { text: title(conv.prompt) || 'Fake model task', usage: { input: 200, output: 10 } }
}

/** Arguments for a tool from what we mean (a path, content, a command), named as its schema names them. */
function argsFor(tool: OfferedTool, want: { path?: string; content?: string; command?: string; cwd?: string | undefined }): Record<string, unknown> {
  const props: Record<string, any> = tool.schema?.properties ?? {}
  const pick = (names: string[]): string | undefined => names.find((n) => n in props)
  const out: Record<string, unknown> = {}
  if (want.path !== undefined) out[pick(['file_path', 'filePath', 'path', 'absolute_path']) ?? 'path'] = want.path
  if (want.content !== undefined) out[pick(['content', 'contents', 'text']) ?? 'content'] = want.content
  if (want.command !== undefined) {
    const key = pick(['command', 'cmd']) ?? 'command'
    const type = String(props[key]?.type ?? 'string').toLowerCase()
    out[key] = type === 'array' ? ['bash', '-lc', want.command] : want.command
    if ('description' in props) out.description = 'Scripted by the fake model'
    if (want.cwd && 'workdir' in props) out.workdir = want.cwd
  }
  // Whatever else the schema requires gets a value of its type.
  for (const name of Array.isArray(tool.schema?.required) ? tool.schema.required : []) {
    if (!(name in out) && props[name]) out[name] = valueFor(props[name])
  }
  return out
}

function title(prompt: string): string {
  const line = prompt.replace(/\bfake:[a-z0-9-]+/g, '').split('\n').map((l) => l.trim()).find((l) => l !== '' && !l.startsWith('<')) ?? ''
  return line.slice(0, 120)
}

/** The working directory a CLI states in its prompt (each in its own words), if any. */
export function workingDirectory(body: unknown): string | undefined {
  const text = JSON.stringify(body)
  const patterns = [
    /<cwd>([^<]+)<\/cwd>/,
    /Primary working directory: ([^\s"\\]+)/,
    /Working directory: ([^\s"\\<]+)/,
    /Workspace Directories:\*\*(?:\\n|\s)+- ([^\s"\\]+)/,
  ]
  for (const re of patterns) {
    const m = re.exec(text)
    if (m) return m[1]!.replace(/\/+$/, '') || '/'
  }
  return undefined
}

/** The conversation of a request in any of the four APIs. */
export function readConversation(api: WireFormat, body: any): Conversation {
  if (api === 'openai-responses') return readResponses(body)
  if (api === 'gemini') return readGemini(body)
  const messages: any[] = Array.isArray(body?.messages) ? body.messages : []
  // A user message whose text follows its tool results is a new prompt (OpenCode sends a follow-up
  // after an interrupted tool that way), not a tool result.
  const isResult = (m: any): boolean => {
    if (m?.role === 'tool') return true
    if (!Array.isArray(m?.content)) return false
    const last = m.content.findLastIndex((b: any) => b?.type === 'tool_result')
    return last >= 0 && textOf(m.content.slice(last + 1)) === ''
  }
  const results = (m: any): number => (m?.role === 'tool' ? 1 : Array.isArray(m?.content) ? m.content.filter((b: any) => b?.type === 'tool_result').length : 0)
  const at = lastIndex(messages, (m) => m?.role === 'user' && !isResult(m) && textOf(m.content) !== '')
  const tools = (Array.isArray(body?.tools) ? body.tools : []).map((t: any) =>
    api === 'anthropic' ? { name: t?.name, schema: t?.input_schema } : { name: t?.function?.name ?? t?.name, schema: t?.function?.parameters ?? t?.parameters })
  return split(messages, at, results, at >= 0 ? textOf(messages[at].content) : '', tools)
}

function readResponses(body: any): Conversation {
  const items = inputItems(body) as any[]
  const at = lastIndex(items, (it) => it?.role === 'user' && (it.type === undefined || it.type === 'message'))
  const results = (it: any): number => (/_call_output$/.test(String(it?.type)) ? 1 : 0)
  const tools = (Array.isArray(body?.tools) ? body.tools : []).filter((t: any) => typeof t?.name === 'string').map((t: any) => ({ name: t.name, schema: t.parameters }))
  return split(items, at, results, at >= 0 ? textOf(items[at].content) : '', tools)
}

function readGemini(body: any): Conversation {
  const contents: any[] = Array.isArray(body?.contents) ? body.contents : []
  const parts = (c: any): any[] => (Array.isArray(c?.parts) ? c.parts : [])
  const results = (c: any): number => parts(c).filter((p) => p?.functionResponse).length
  const at = lastIndex(contents, (c) => c?.role === 'user' && results(c) === 0 && textOf(parts(c)) !== '')
  const prompt = at >= 0 ? textOf(parts(contents[at])) : ''
  const tools = (Array.isArray(body?.tools) ? body.tools : []).flatMap((t: any) => (Array.isArray(t?.functionDeclarations) ? t.functionDeclarations : []))
    .map((f: any) => ({ name: f?.name, schema: f?.parametersJsonSchema ?? f?.parameters }))
  return split(contents, at, results, prompt, tools)
}

function split(list: any[], at: number, results: (x: any) => number, prompt: string, tools: OfferedTool[]): Conversation {
  const count = (xs: any[]): number => xs.reduce((n, x) => n + results(x), 0)
  return { prompt, after: count(list.slice(at + 1)), before: count(list.slice(0, Math.max(at, 0))), tools: tools.filter((t) => typeof t.name === 'string') }
}

function lastIndex<T>(xs: T[], pred: (x: T) => boolean): number {
  for (let i = xs.length - 1; i >= 0; i--) if (pred(xs[i]!)) return i
  return -1
}

/** The text of message content in any of the formats: a string, or text parts of an array. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  // Blocks wholly in angle brackets are context a CLI adds beside the prompt (a system reminder,
  // an environment description), not the user's words.
  return content.filter((b) => typeof b?.text === 'string' && ['text', 'input_text', undefined].includes(b.type) && !/^\s*<[\s\S]*>\s*$/.test(b.text))
    .map((b) => b.text as string).join('\n')
}
