// pack.yaml parsing: defaults, normalisation, and one clear field error per problem.
import { describe, expect, it } from 'vitest'
import { CorralError } from '../../src/contract/index.js'
import { PACK_NAME_PATTERN, parsePackManifest } from '../../src/packs/manifest.js'
import { NAME_SCHEMA } from '../../src/server/schemas/common.js'

function fields(source: string): Record<string, string> {
  try {
    parsePackManifest(source)
  } catch (err) {
    expect(err).toBeInstanceOf(CorralError)
    expect((err as CorralError).code).toBe('validation_error')
    return (err as CorralError).details!.fields as Record<string, string>
  }
  throw new Error('expected a validation error')
}

describe('parsePackManifest', () => {
  it('uses the same name grammar as roles', () => {
    expect(PACK_NAME_PATTERN).toBe(NAME_SCHEMA.pattern)
  })

  it('parses the minimal manifest with display_name defaulting to the name', () => {
    expect(parsePackManifest('name: demo\nversion: "1"\n')).toEqual({ name: 'demo', version: '1', display_name: 'demo' })
  })

  it('parses every field and normalises suggested_packs and the capabilities path', () => {
    const m = parsePackManifest([
      'name: web-tools',
      'version: 2.1.0',
      'display_name: Web tools',
      'description: Browsing helpers',
      'category: research',
      'suggested_packs: [git, python, git]',
      'capabilities: ./policy//caps.yaml',
      'agent:',
      '  command: [node, agent.js]',
      '  env: { MODE: fast }',
      'agent_events:',
      '  tool_call:',
      '    type: object',
      '    properties: { tool: { enum: [browse, fetch] } }',
    ].join('\n'))
    expect(m).toEqual({
      name: 'web-tools',
      version: '2.1.0',
      display_name: 'Web tools',
      description: 'Browsing helpers',
      category: 'research',
      suggested_packs: 'git,python',
      capabilities_file: 'policy/caps.yaml',
      agent: { command: ['node', 'agent.js'], env: { MODE: 'fast' } },
      agent_events: { tool_call: { type: 'object', properties: { tool: { enum: ['browse', 'fetch'] } } } },
    })
    expect(parsePackManifest('name: a\nversion: "1"\nsuggested_packs: " git , python,"\n').suggested_packs).toBe('git,python')
  })

  it('drops the trailing newline of a folded or literal description block, and a blank description', () => {
    expect(parsePackManifest('name: a\nversion: "1"\ndescription: >\n  one\n  two\n').description).toBe('one two')
    expect(parsePackManifest('name: a\nversion: "1"\ndescription: |\n  line 1\n  line 2\n').description).toBe('line 1\nline 2')
    expect(parsePackManifest('name: a\nversion: "1"\ndescription: "  "\n')).not.toHaveProperty('description')
  })

  it('reports each invalid field', () => {
    expect(fields('version: "1"\n')).toEqual({ name: 'is required' })
    expect(Object.keys(fields('name: 9lives\nversion: 1\n'))).toEqual(expect.arrayContaining(['name', 'version']))
    expect(fields('name: a\nversion: "1"\nextra: 1\n')).toEqual({ extra: 'is not a known field' })
    expect(Object.keys(fields('name: a\nversion: "1"\nagent: { command: [] }\n'))).toEqual(['agent.command'])
    expect(Object.keys(fields('name: a\nversion: "1"\nagent: { command: [x], env: { "1BAD": y } }\n'))[0]).toMatch(/^agent\.env/)
    expect(Object.keys(fields('name: a\nversion: "1"\nsuggested_packs: [ok, "not ok"]\n'))[0]).toMatch(/^suggested_packs/)
    expect(fields('name: a\nversion: "1"\nsuggested_packs: "ok, not ok"\n').suggested_packs).toMatch(/not a pack name/)
    expect(fields('name: a\nversion: "1"\ncapabilities: ../caps.yaml\n').capabilities).toMatch(/inside the pack/)
    expect(fields('name: a\nversion: "1"\ncapabilities: /etc/caps.yaml\n').capabilities).toMatch(/inside the pack/)
  })

  it('checks agent event types and compiles their schemas, refusing external $ref', () => {
    expect(fields('name: a\nversion: "1"\nagent_events:\n  made_up: { type: object }\n')['agent_events.made_up']).toMatch(/not an agent event type/)
    expect(fields('name: a\nversion: "1"\nagent_events:\n  tool_call: { $ref: "https://example.com/s.json" }\n')['agent_events.tool_call']).toMatch(/external \$ref/)
    expect(fields('name: a\nversion: "1"\nagent_events:\n  tool_call: { type: 12 }\n')['agent_events.tool_call']).toMatch(/invalid JSON Schema/)
    expect(Object.keys(fields('name: a\nversion: "1"\nagent_events:\n  tool_call: [1]\n'))).toEqual(['agent_events.tool_call'])
  })

  it('refuses YAML that is not a mapping, broken YAML and alias bombs', () => {
    expect(fields('- a\n- b\n')['pack.yaml']).toMatch(/mapping/)
    expect(fields('name: [a\n')['pack.yaml']).toMatch(/not valid YAML/)
    expect(fields('name: a\nname: b\nversion: "1"\n')['pack.yaml']).toMatch(/not valid YAML/)
    const L = (i: number) => String.fromCharCode(97 + i)
    const bomb = ['name: x', 'version: "1"', 'a: &a [x, x, x, x, x, x, x, x, x, x]', ...Array.from({ length: 8 }, (_, i) => `${L(i + 1)}: &${L(i + 1)} [${Array(10).fill(`*${L(i)}`).join(', ')}]`)].join('\n')
    expect(fields(bomb)['pack.yaml']).toMatch(/alias/)
    expect(fields('x'.repeat(300 * 1024))['pack.yaml']).toMatch(/larger than/)
  })
})
