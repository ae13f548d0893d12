// The event vocabulary carries each type's category and actor (one table, src/contract/audit-vocabulary.ts),
// consistent with the spec's Events section, and no producer in src/ chooses them at its emit.
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { stamp } from '../../src/audit/index.js'
import { AGENT_EVENT_TYPES, EVENT_KINDS, EVENT_TYPES, type Actor, type Category } from '../../src/contract/index.js'

// control-plane.md "Events", transcribed: the configuration mutations (audit, control-plane), the
// workspace and task lifecycle (activity, actor per row), proxy decisions and agent events.
const CONFIG = [
  'provider_created', 'provider_updated', 'provider_deleted', 'provider_archived', 'provider_unarchived',
  'agent_role_created', 'agent_role_updated', 'agent_role_deleted', 'agent_role_archived', 'agent_role_unarchived',
  'content_pack_created', 'content_pack_updated', 'content_pack_deleted', 'content_pack_cloned',
  'credential_created', 'credential_deleted', 'credential_authorized', 'credential_status', 'secret_created', 'secret_deleted',
  'api_key_created', 'api_key_revoked', 'membership_invited', 'membership_accepted', 'membership_updated', 'membership_removed',
  'membership_first_seen', 'workspace_forked', 'workspace_fork_created',
]
const LIFECYCLE: Record<string, Actor> = {
  workspace_created: 'control-plane', workspace_provisioned: 'control-plane', workspace_activated: 'policy-engine',
  workspace_deactivated: 'policy-engine', workspace_evicted: 'policy-engine', workspace_restarted: 'control-plane',
  workspace_stopped: 'control-plane', workspace_archived: 'control-plane', workspace_unarchived: 'control-plane',
  task_submitted: 'control-plane', task_completed: 'control-plane',
}
const AGENT = [
  'session_start', 'session_end', 'session_wrap_up', 'task_start', 'task_end', 'iteration_start', 'iteration_end', 'agent_thinking',
  'agent_response', 'current_status', 'tool_call', 'tool_result', 'compaction_start', 'compaction_end', 'step_status',
  'progress_status', 'file_change',
]
/** corral's own types beyond the spec's catalog (docs/audit.md). */
const EXTENSIONS: Record<string, [Category, Actor]> = { proxy_token_minted: ['audit', 'control-plane'] }

const SPEC: Record<string, [Category, Actor]> = {
  ...Object.fromEntries(CONFIG.map((t) => [t, ['audit', 'control-plane']])),
  ...Object.fromEntries(Object.entries(LIFECYCLE).map(([t, a]) => [t, ['activity', a]])),
  policy_decision: ['audit', 'policy-engine'],
  ...Object.fromEntries(AGENT.map((t) => [t, ['activity', 'agent']])),
  ...EXTENSIONS,
}

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return sources(path)
    return /\.tsx?$/.test(name) ? [path] : []
  })
}

describe('audit event vocabulary', () => {
  it('every event type has the category and actor of the spec, and the spec has no type the vocabulary lacks', () => {
    expect([...EVENT_TYPES].sort()).toEqual(Object.keys(SPEC).sort())
    for (const type of EVENT_TYPES) {
      const kind = EVENT_KINDS[type] as { category: Category; actor: Actor }
      expect({ type, category: kind.category, actor: kind.actor }).toEqual({ type, category: SPEC[type][0], actor: SPEC[type][1] })
    }
    expect([...AGENT_EVENT_TYPES].sort()).toEqual([...AGENT].sort())
  })

  it('only credential_status has a second actor: the proxy refresh that flips it (docs/credentials.md)', () => {
    const multi = EVENT_TYPES.filter((t) => 'alsoBy' in EVENT_KINDS[t])
    expect(multi).toEqual(['credential_status'])
    expect(EVENT_KINDS.credential_status.alsoBy).toEqual(['policy-engine'])
  })

  it('an emitted event takes its category and actor from the vocabulary', () => {
    for (const type of EVENT_TYPES) {
      const e = stamp({ org_id: 'org_1', user_id: 'u', event_type: type })
      expect([e.category, e.actor]).toEqual(SPEC[type])
    }
    expect(stamp({ org_id: 'org_1', user_id: 'system', event_type: 'credential_status', actor: 'policy-engine' })).toMatchObject({ category: 'audit', actor: 'policy-engine' })
  })

  it('no producer in src/ names a category at its emit, and an actor only where the type lists it in alsoBy', () => {
    const offenders: string[] = []
    for (const file of sources(join(import.meta.dirname, '../../src'))) {
      if (file.includes('/src/contract/') || file.includes('/src/console/')) continue
      const text = readFileSync(file, 'utf8')
      for (const m of text.matchAll(/event_type: ['\w.]+[^\n]*?\b(category|actor): '([\w-]+)'|\b(category|actor): '(audit|activity|control-plane|policy-engine|agent)'/g)) {
        const line = text.slice(0, m.index).split('\n').length
        const near = text.slice(Math.max(0, m.index - 200), m.index + m[0].length)
        if (/event_type: 'credential_status', actor: 'policy-engine'/.test(near)) continue
        offenders.push(`${file}:${line}: ${m[0]}`)
      }
    }
    expect(offenders).toEqual([])
  })
})
