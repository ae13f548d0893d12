// The agent tests' fake model provider is corral dev's (src/dev/fake-model.ts), one wire format per
// server and every request recorded, so a test can assert on what the agent sent.
import { startFakeModel, type FakeModel, type Script } from '../../src/dev/index.js'

export type { Script, ScriptedReply, SeenModelRequest } from '../../src/dev/index.js'
export type FakeProvider = FakeModel

export function startFakeAnthropic(script: Script, tls?: { key: string; cert: string }): Promise<FakeProvider> {
  return startFakeModel({ script, formats: ['anthropic'], record: true, ...(tls ? { tls } : {}) })
}

export function startFakeOpenAi(script: Script, tls?: { key: string; cert: string }): Promise<FakeProvider> {
  return startFakeModel({ script, formats: ['openai'], record: true, ...(tls ? { tls } : {}) })
}
