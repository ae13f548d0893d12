// The parsed pack.yaml (docs/packs.md): what src/packs/ parses and checks, what the store keeps in
// a pack row and what the runtime launches a pack's agent from. The shape lives in the contract so
// the store can type its rows without importing the pack parser (which imports the store).
import type { AgentEventType } from './audit-vocabulary.js'

export interface PackAgent {
  /** argv of the agent process this pack provides (non-empty). */
  command: string[]
  /** Extra environment for that process. */
  env?: Record<string, string>
}

export interface PackManifest {
  name: string
  version: string
  /** Defaults to `name`. */
  display_name: string
  description?: string
  category?: string
  /** Comma-separated pack names (the spec's display hint), normalised from a list or a string. */
  suggested_packs?: string
  /** Path (inside the pack) of a caps.yaml fragment; its text becomes the pack's `capabilities`. */
  capabilities_file?: string
  agent?: PackAgent
  /** Per agent event type, a JSON Schema the event body must ALSO satisfy (besides corral's own). */
  agent_events?: Partial<Record<AgentEventType, Record<string, unknown>>>
}
