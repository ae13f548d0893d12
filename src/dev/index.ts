// `corral dev`'s parts: a fake model provider (a separate HTTP server speaking the Anthropic,
// OpenAI Chat Completions and Responses, and Gemini wire formats), the scripts it runs (the demo's
// for the reference agent, the agent CLIs'), and the demo seed made through /v1.
// Imports no server, proxy or store: the command wires these to a real `serve`.
export {
  startFakeModel, WIRE_APIS, WIRE_PATHS, type FakeModel, type FakeModelOptions, type Script, type ScriptContext, type ScriptedReply, type ScriptedTool,
  type SeenModelRequest, type WireFormat,
} from './fake-model.js'
export { demoScript, devScript, DEMO_FILE } from './demo-script.js'
export { cliScript, readConversation, workingDirectory, CLI_FILE, type Conversation } from './cli-script.js'
export { DEMO, demoCaps, isUnauthorized, modelPolicy, seedDemo, type ModelPolicyOptions, type SeedResult } from './seed.js'
