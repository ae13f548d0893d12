import { Args } from '@oclif/core'
import * as Flags from '@oclif/core/flags'
import { ApiCommand } from '../../cli/api-command.js'
import { THINKING_EFFORTS } from '../../contract/index.js'
import { UsageError } from '../../cli/errors.js'
import { followTaskToEnd } from '../../cli/task-follow.js'
import { diag } from '../../cli/output.js'
import { workspacesApi, type TaskAccepted, type TaskRecord, type TaskSubmission } from '../../client/index.js'

type Result = TaskAccepted | TaskRecord | undefined

export default class TaskSubmit extends ApiCommand<Result> {
  static override summary = 'Submit a task: a new workspace from a role, or a follow-up on --workspace.'
  static override description = `Files given with --file are uploaded and land in the workspace at /data/uploads/<task id>/. With --wait the command follows the workspace's activity stream and shows the agent's events and each policy decision (allow or deny with its reason, destination, capability, debits) live until the task ends, under a spinner with the elapsed time on a terminal (plain lines, no cursor movement, when stderr is not a terminal; no colour with NO_COLOR); it exits 1 unless the task completed. Ctrl-C stops watching; "corral task watch ID" re-attaches. With --json and --wait, the output is NDJSON: every event, then the final task.`
  static override examples = [
    '<%= config.bin %> task submit --role coder "Fix the failing test" --file report.txt --wait',
    '<%= config.bin %> task submit --workspace ws_0193… "Now add a changelog entry" --json',
  ]

  static override args = { description: Args.string({ required: true, description: 'What the agent should do.' }) }
  static override flags = {
    role: Flags.string({ char: 'r', helpValue: 'NAME', summary: 'Agent role name (or id) for the new workspace.', exclusive: ['workspace'] }),
    workspace: Flags.string({ char: 'w', helpValue: 'ID', summary: 'Submit a follow-up task to this workspace instead.' }),
    file: Flags.string({ char: 'f', multiple: true, helpValue: 'PATH', summary: 'Upload a file with the task (repeatable).' }),
    wait: Flags.boolean({ summary: 'Follow the agent live until the task ends.' }),
    'thinking-effort': Flags.string({ options: [...THINKING_EFFORTS], summary: 'Override the role\'s thinking effort.' }),
    'max-continuations': Flags.integer({ min: 0, summary: 'Override the role\'s max continuations.' }),
    'reset-session': Flags.boolean({ summary: 'Follow-up only: start with a fresh agent session.' }),
  }

  async execute(): Promise<Result> {
    const { args, flags } = await this.parse(TaskSubmit)
    if (!flags.role && !flags.workspace) throw new UsageError('pass --role NAME for a new workspace, or --workspace ID for a follow-up (see --help)')
    if (flags['reset-session'] && !flags.workspace) throw new UsageError('--reset-session only applies to a follow-up (--workspace) (see --help)')
    const api = workspacesApi(this.client)
    const s: TaskSubmission = {
      description: args.description,
      ...(flags['thinking-effort'] ? { thinking_effort: flags['thinking-effort'] } : {}),
      ...(flags['max-continuations'] !== undefined ? { max_continuations: flags['max-continuations'] } : {}),
      ...(flags.file ? { files: flags.file } : {}),
    }
    const accepted = flags.workspace
      ? await api.followUp(flags.workspace, { ...s, ...(flags['reset-session'] ? { reset_session: true } : {}) })
      : await api.submitTask({ ...s, ...(/^role_[0-9a-f]{32}$/.test(flags.role!) ? { role_id: flags.role } : { role_name: flags.role }) })
    if (!flags.wait) return accepted
    const json = this.jsonEnabled()
    if (!json) diag(`Task ${accepted.task_id} submitted to workspace ${accepted.workspace_id}; following its activity (Ctrl-C stops watching, the task goes on).`)
    await followTaskToEnd(this.client, { taskId: accepted.task_id, workspaceId: accepted.workspace_id }, json)
    return undefined
  }

  protected override render(r: Result): void {
    if (r && 'task_id' in r) process.stdout.write(`Task ${r.task_id} ${r.status} on workspace ${r.workspace_id}\n`)
  }
}
