import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { OUTPUT_CAP, Toolbox } from '../../src/agent/tools.js'

describe(Toolbox.name, () => {
  let base: string
  let root: string
  let tools: Toolbox

  beforeAll(async () => {
    base = await mkdtemp(join(tmpdir(), 'corral-tools-'))
    root = join(base, 'data')
    await mkdir(root)
    await writeFile(join(base, 'outside.txt'), 'secret')
    await symlink(base, join(root, 'escape'))
    tools = new Toolbox(root)
  })
  afterAll(async () => {
    await rm(base, { recursive: true, force: true })
  })

  it('writes and reads files under the root, reporting created then modified', async () => {
    expect(await tools.run('write_file', { path: 'a/b.txt', content: 'one' })).toMatchObject({ isError: false, fileChanges: [{ path: 'a/b.txt', action: 'created', size: 3 }] })
    expect(await tools.run('write_file', { path: join(root, 'a/b.txt'), content: 'two!' })).toMatchObject({ fileChanges: [{ action: 'modified', size: 4 }] })
    expect(await tools.run('read_file', { path: 'a/b.txt' })).toEqual({ output: 'two!', isError: false })
  })

  it.each([
    ['../outside.txt', /outside the workspace/],
    ['/etc/passwd', /outside the workspace/],
    ['a/../../outside.txt', /outside the workspace/],
    ['escape/outside.txt', /through a symbolic link/],
    ['escape/new-file.txt', /through a symbolic link/],
  ])('refuses the path %s', async (path, message) => {
    const read = await tools.run('read_file', { path })
    expect(read.isError).toBe(true)
    expect(read.output).toMatch(message)
    const write = await tools.run('write_file', { path, content: 'x' })
    expect(write.isError).toBe(true)
  })

  it('never wrote through the refused paths', async () => {
    expect(await readFile(join(base, 'outside.txt'), 'utf8')).toBe('secret')
  })

  it('runs commands in the root with exit code, caps their output and kills them on timeout', async () => {
    expect(await tools.run('run_command', { command: 'pwd; exit 3' })).toEqual({ output: `exit code 3\n${root}\n`, isError: true })
    const big = await tools.run('run_command', { command: `head -c ${OUTPUT_CAP * 3} /dev/zero | tr '\\0' x` })
    expect(big.output).toMatch(/more bytes of output cut/)
    expect(big.output.length).toBeLessThan(OUTPUT_CAP + 200)
    // The background child is in the command's process group and dies with it.
    const slow = await tools.run('run_command', { command: 'sleep 30 & sleep 30', timeout_seconds: 1 })
    expect(slow).toMatchObject({ isError: true, output: expect.stringMatching(/^timed out after 1s/) })
  })

  it('answers unknown tools and bad input with an error the model can read', async () => {
    expect(await tools.run('rm_rf', {})).toMatchObject({ isError: true, output: expect.stringMatching(/Unknown tool "rm_rf"/) })
    expect(await tools.run('write_file', { path: 'x' })).toEqual({ output: 'content must be a string', isError: true })
    expect(await tools.run('finish', { summary: 'bye', status: 'failed' })).toMatchObject({ finish: { summary: 'bye', status: 'failed' } })
  })
})
