// `corral dev`'s parts: a fake model provider (a separate HTTP server speaking the Anthropic and
// OpenAI streaming wire formats), the demo script it runs, and the demo seed made through /v1.
// Imports no server, proxy or store: the command wires these to a real `serve`.
export { startFakeModel, WIRE_PATHS, type FakeModel, type FakeModelOptions, type Script, type ScriptedReply, type SeenModelRequest, type WireFormat } from './fake-model.js'
export { demoScript, DEMO_FILE } from './demo-script.js'
export { DEMO, demoCaps, isUnauthorized, modelPolicy, seedDemo, type ModelPolicyOptions, type SeedResult } from './seed.js'
