// Packs: pack.yaml (manifest.ts), the archive reader (archive.ts), the content-addressed store of
// extracted trees (content.ts), the OCI registry client (registry*.ts) and the pack service
// (pack-service.ts: every /v1/packs operation; pack-rules.ts: what a change must keep). The HTTP
// side is src/server/routes/packs.ts; the records are src/store/repositories/packs.ts. Rules and
// decisions: docs/packs.md.
export { PACK_NAME_PATTERN, isInsidePath, parsePackManifest } from './manifest.js'
export { DEFAULT_ARCHIVE_LIMITS, archiveLimitsFromEnv, extractPackArchive, type ArchiveLimits, type ExtractedArchive } from './archive.js'
export { DIGEST_RE, PackContent, type IngestedPack } from './content.js'
export { PackService, type PackActor, type PackServiceDeps, type PackUpdate } from './pack-service.js'
export { checkPackIds } from './pack-rules.js'
export { registrySettingsFromEnv, type RegistrySettings } from './registry-settings.js'
export { PackTreeUnavailable, PackTrees, type PackTreeRecord } from './pack-trees.js'
