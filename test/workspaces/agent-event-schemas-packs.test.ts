// Agent events checked against corral's schema for their type AND the schemas attached packs
// declare for it (docs/workspaces.md "Agent events"): the combination, the error shape (field
// messages, the refusing packs named) and the compile-once cache by pack digest.
import { describe, expect, it } from 'vitest'
import {
  agentEventErrors, agentEventViolation, compiledPackCount, packEventValidators,
} from '../../src/workspaces/agent-event-schemas.js'

const needsPercent = packEventValidators({
  name: 'shell-agent', digest: 'sha256:schemas-test-a',
  agent_events: {
    progress_status: { type: 'object', required: ['percent'], properties: { percent: { type: 'integer', minimum: 0, maximum: 100 } } },
    file_change: { type: 'object', properties: { path: { type: 'string', pattern: '^[^/]' } } },
  },
})
const needsStep = packEventValidators({
  name: 'steps', digest: 'sha256:schemas-test-b',
  agent_events: { progress_status: { type: 'object', required: ['step'], properties: { step: { type: 'string' } } } },
})

describe('agent event schemas with packs', () => {
  it('without packs, answers exactly as corral\'s own schema does', () => {
    expect(agentEventViolation('progress_status', { type: 'progress_status' })).toBeUndefined()
    const bad = agentEventViolation('file_change', { type: 'file_change', path: 3 })
    expect(bad).toEqual({ message: 'the file_change event does not match its schema', fields: agentEventErrors('file_change', { type: 'file_change', path: 3 }), packs: [] })
  })

  it('a body must satisfy every attached pack\'s schema for its type; types a pack does not declare are corral\'s alone', () => {
    expect(agentEventViolation('progress_status', { type: 'progress_status', percent: 40, step: 'x' }, [needsPercent, needsStep])).toBeUndefined()
    expect(agentEventViolation('progress_status', { type: 'progress_status', percent: 140, step: 'x' }, [needsPercent, needsStep])).toEqual({
      message: 'the progress_status event does not match the schema of pack shell-agent',
      fields: { '/percent': 'must be <= 100' },
      packs: ['shell-agent'],
    })
    expect(agentEventViolation('progress_status', { type: 'progress_status' }, [needsPercent, needsStep])).toEqual({
      message: 'the progress_status event does not match the schema of pack shell-agent and the schema of pack steps',
      fields: { '/percent': "must have required property 'percent'", '/step': "must have required property 'step'" },
      packs: ['shell-agent', 'steps'],
    })
    // task_start is declared by neither pack.
    expect(agentEventViolation('task_start', { type: 'task_start', description: 'd' }, [needsPercent, needsStep])).toBeUndefined()
  })

  it('corral\'s own violations come first and keep their message for a field both refuse', () => {
    // corral: path must be a non-empty string; the pack: must not start with "/".
    const both = agentEventViolation('file_change', { type: 'file_change', path: '/abs', iteration: -1 }, [needsPercent])
    expect(both).toEqual({
      message: 'the file_change event does not match its schema and the schema of pack shell-agent',
      fields: { '/iteration': 'must be >= 0', '/path': 'must match pattern "^[^/]"' },
      packs: ['shell-agent'],
    })
    const ownOnly = agentEventViolation('file_change', { type: 'file_change' }, [needsPercent])
    expect(ownOnly?.fields).toEqual({ '/path': "must have required property 'path'" })
    expect(ownOnly?.packs).toEqual([])
  })

  it('compiles once per pack digest: another pack (a clone) with the same digest reuses the validators', () => {
    const before = compiledPackCount()
    const clone = packEventValidators({ name: 'shell-agent-copy', digest: 'sha256:schemas-test-a', agent_events: {} })
    expect(compiledPackCount()).toBe(before)
    expect(clone.name).toBe('shell-agent-copy')
    expect(clone.validators).toBe(needsPercent.validators)
    expect(agentEventViolation('progress_status', { type: 'progress_status' }, [clone])?.packs).toEqual(['shell-agent-copy'])
  })

  it('a schema that does not compile is an error naming the pack and the type', () => {
    expect(() => packEventValidators({ name: 'broken', digest: 'sha256:schemas-test-c', agent_events: { tool_call: { $ref: 'https://example.com/s.json' } } }))
      .toThrow(/agent_events schema for tool_call of pack broken does not compile: external \$ref/)
  })
})
