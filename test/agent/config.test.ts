import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { agentEnvironment, configFromEnv, DEFAULT_EVENTS_URL } from '../../src/agent/config.js'
import { FileTaskSource, parseTasks } from '../../src/agent/task-source.js'

describe('agent configuration', () => {
  it('reads the role settings and the runtime variables', () => {
    const config = configFromEnv({
      CORRAL_PROVIDER_KIND: 'openai', CORRAL_PROVIDER_BASE_URL: 'https://llm.example/v1', CORRAL_MODEL: 'm',
      CORRAL_THINKING_EFFORT: 'low', CORRAL_MAX_CONTINUATIONS: '2', CORRAL_MAX_CONTEXT_TOKENS: '90000',
      CORRAL_ENVIRONMENT: 'production', CORRAL_ENVIRONMENT_DESCRIPTION: 'live', CORRAL_WORKSPACE_DIR: '/data',
      HTTPS_PROXY: 'http://127.0.0.1:3128', CORRAL_PROXY_TOKEN: 'tok', CORRAL_CA_FILE: '/run/corral/corral-ca.pem',
    })
    expect(config).toEqual({
      provider: 'openai', baseUrl: 'https://llm.example/v1', model: 'm', workspaceDir: '/data', eventsUrl: DEFAULT_EVENTS_URL,
      proxyUrl: 'http://127.0.0.1:3128', proxyToken: 'tok', caFile: '/run/corral/corral-ca.pem',
      defaults: { thinking_effort: 'low', max_continuations: 2, max_context_tokens: 90000, environment: 'production', environment_description: 'live' },
    })
  })

  it('builds the agent environment from a role and its provider, and reads it back', () => {
    const env = agentEnvironment({
      provider: { kind: 'anthropic', base_url: 'https://api.anthropic.com', default_model: 'claude-default' },
      role: { model: null, thinking_effort: 'high', max_continuations: 0, max_context_tokens: null, environment: 'staging', environment_description: 'stage' },
      eventsUrl: 'https://corral.internal',
    })
    expect(env).toEqual({
      CORRAL_PROVIDER_KIND: 'anthropic', CORRAL_MODEL: 'claude-default', CORRAL_PROVIDER_BASE_URL: 'https://api.anthropic.com',
      CORRAL_THINKING_EFFORT: 'high', CORRAL_MAX_CONTINUATIONS: '0', CORRAL_ENVIRONMENT: 'staging', CORRAL_ENVIRONMENT_DESCRIPTION: 'stage',
      CORRAL_EVENTS_URL: 'https://corral.internal',
    })
    expect(configFromEnv(env)).toMatchObject({
      provider: 'anthropic', model: 'claude-default',
      defaults: { thinking_effort: 'high', max_continuations: 0, environment: 'staging', environment_description: 'stage' },
    })
    expect(agentEnvironment({ provider: { kind: 'openai' }, role: { model: 'gpt-x' } })).toEqual({ CORRAL_PROVIDER_KIND: 'openai', CORRAL_MODEL: 'gpt-x' })
  })

  it('lists every problem at once', () => {
    expect(() => configFromEnv({ CORRAL_PROVIDER_KIND: 'bard', CORRAL_THINKING_EFFORT: 'max', CORRAL_MAX_CONTINUATIONS: '-1' }))
      .toThrow(/CORRAL_PROVIDER_KIND must be one of anthropic, openai; CORRAL_MODEL is not set.*; CORRAL_THINKING_EFFORT must be one of .*; CORRAL_MAX_CONTINUATIONS must be a non-negative integer/)
  })

  it('reads tasks as one JSON object, an array or NDJSON, and validates them', async () => {
    expect(parseTasks('{"id":"t1","description":"d"}', 'f')).toEqual([{ id: 't1', description: 'd' }])
    expect(parseTasks('[{"id":"a","description":"x"},{"id":"b","description":"y"}]', 'f').map((t) => t.id)).toEqual(['a', 'b'])
    expect(parseTasks('{"id":"a","description":"x"}\n{"id":"b","description":"y","reset_session":true}\n', 'f')[1].reset_session).toBe(true)
    expect(() => parseTasks('{"id":"a"}', 'tasks.json')).toThrow('tasks.json: task 1: description must be a non-empty string')
    expect(() => parseTasks('{"id":"a","description":"x","thinking_effort":"max"}', 'f')).toThrow(/thinking_effort must be one of/)
    const dir = await mkdtemp(join(tmpdir(), 'corral-tasks-'))
    try {
      await writeFile(join(dir, 't.json'), '{"id":"only","description":"x"}')
      const source = new FileTaskSource(join(dir, 't.json'))
      expect((await source.next())?.id).toBe('only')
      expect(await source.next()).toBeNull()
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
