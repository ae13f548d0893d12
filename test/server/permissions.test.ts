import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { PERMISSIONS, PERMISSION_SET_GRANTS, ROLE_GRANTS, ROLES, PERMISSION_SETS, evaluate, permissionsOfRole, permissionsOfSet } from '../../src/server/permissions.js'

describe('permissions', () => {
  it('has exactly the twelve spec permission strings', () => {
    expect(PERMISSIONS).toHaveLength(12)
    expect(new Set(PERMISSIONS).size).toBe(12)
  })

  it('no default role holds unscoped tasks:write, and every role holds the :own variants it needs', () => {
    for (const role of ROLES) {
      expect(ROLE_GRANTS[role]).not.toContain('tasks:write')
      expect(ROLE_GRANTS[role]).toContain('tasks:write:own')
      expect(ROLE_GRANTS[role]).toContain('workspace:write:own')
    }
  })

  it('templates and roles only use known permissions', () => {
    for (const list of [...Object.values(PERMISSION_SET_GRANTS), ...Object.values(ROLE_GRANTS)]) {
      for (const p of list) expect(PERMISSIONS).toContain(p)
    }
  })

  it('evaluate prefers the unscoped grant and reports :own-only grants', () => {
    expect(evaluate(permissionsOfRole('owner'), [['audit:read', 'audit:read:own']])).toEqual([{ scope: 'all' }])
    expect(evaluate(permissionsOfRole('member'), [['audit:read', 'audit:read:own']])).toEqual([{ scope: 'own' }])
    expect(evaluate(permissionsOfSet('read_only'), [['apikeys:write']])).toBeUndefined()
    expect(evaluate(permissionsOfRole('member'), [['workspace:read', 'workspace:read:own'], ['audit:read', 'audit:read:own']])).toEqual([{ scope: 'own' }, { scope: 'own' }])
    expect(evaluate(new Set(), null)).toEqual([])
  })

  it('docs/permissions.md states the same tables', () => {
    const doc = readFileSync(new URL('../../docs/permissions.md', import.meta.url), 'utf8')
    for (const [name, grants] of [...Object.entries(PERMISSION_SET_GRANTS), ...Object.entries(ROLE_GRANTS)]) {
      const row = doc.split('\n').find((l) => l.startsWith(`| \`${name}\` |`))
      expect(row, `row for ${name}`).toBeDefined()
      const listed = [...row!.matchAll(/`([a-z]+:[a-z]+(?::own)?)`/g)].map((m) => m[1]).sort()
      expect(listed, name).toEqual([...grants].sort())
    }
    for (const s of PERMISSION_SETS) expect(doc).toContain(`\`${s}\``)
  })
})
