// role.yaml naming packs: `packs:` (names or ids) next to the existing `pack_ids`, and the labels
// `role show` puts on attached pack ids.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { readRoleFile, RoleFileError } from '../../src/cli/role-file.js'
import { labelPackIds } from '../../src/cli/role-output.js'
import type { AgentRoleRecord } from '../../src/client/roles.js'

let dir: string
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'corral-role-file-'))
})
afterEach(() => rmSync(dir, { recursive: true, force: true }))

function file(text: string): string {
  const path = join(dir, 'role.yaml')
  writeFileSync(path, text)
  return path
}

describe('readRoleFile packs', () => {
  it('keeps packs: as written for the CLI to resolve, and pack_ids as the body', async () => {
    const named = await readRoleFile(file('name: r\nprovider: p\npacks: [hello-pack, pack_0193abc]\n'))
    expect(named.packs).toEqual(['hello-pack', 'pack_0193abc'])
    expect(named.body.pack_ids).toBeUndefined()
    expect((await readRoleFile(file('name: r\npacks: []\n'))).packs).toEqual([])
    const ids = await readRoleFile(file('name: r\npack_ids: [pack_1]\n'))
    expect(ids.packs).toBeUndefined()
    expect(ids.body.pack_ids).toEqual(['pack_1'])
  })

  it('refuses packs with pack_ids, and packs that are not a list of names', async () => {
    await expect(readRoleFile(file('packs: [a]\npack_ids: [pack_1]\n'))).rejects.toThrow('give packs or pack_ids, not both')
    for (const bad of ['packs: hello-pack\n', 'packs: [1]\n', 'packs: [""]\n', 'packs: [{name: a}]\n']) {
      const err = await readRoleFile(file(bad)).catch((e: unknown) => e)
      expect(err, bad).toBeInstanceOf(RoleFileError)
      expect((err as Error).message, bad).toContain('packs must be a list of pack names')
    }
  })
})

describe('readRoleFile resources', () => {
  it('passes resources through as the body (null clears them) and refuses a value that is not a mapping', async () => {
    const r = await readRoleFile(file('name: r\nresources:\n  requests: { cpu: 250m }\n  limits: { memory: 2Gi }\n'))
    expect(r.body.resources).toEqual({ requests: { cpu: '250m' }, limits: { memory: '2Gi' } })
    expect((await readRoleFile(file('name: r\nresources: null\n'))).body.resources).toBeNull()
    expect((await readRoleFile(file('name: r\n'))).body.resources).toBeUndefined()
    for (const bad of ['resources: 2Gi\n', 'resources: [cpu]\n']) {
      const err = await readRoleFile(file(bad)).catch((e: unknown) => e)
      expect(err, bad).toBeInstanceOf(RoleFileError)
      expect((err as Error).message, bad).toContain('resources must be a mapping')
    }
  })
})

describe('labelPackIds', () => {
  it('shows known packs as name (id) and leaves unknown ids bare', () => {
    const role = { id: 'role_1', name: 'r', pack_ids: ['pack_a', 'pack_gone'] } as AgentRoleRecord
    expect(labelPackIds(role, new Map([['pack_a', 'hello-pack']])).pack_ids).toEqual(['hello-pack (pack_a)', 'pack_gone'])
    expect(role.pack_ids).toEqual(['pack_a', 'pack_gone'])
  })
})
