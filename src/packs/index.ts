// Packs: pack.yaml (manifest.ts), the archive reader (archive.ts) and the content-addressed store
// of extracted trees (content.ts). The /v1/packs routes are src/server/routes/packs.ts; the
// records are src/store/repositories/packs.ts. Rules and decisions: docs/packs.md.
export { PACK_NAME_PATTERN, isInsidePath, parsePackManifest, type PackAgent, type PackManifest } from './manifest.js'
export { DEFAULT_ARCHIVE_LIMITS, archiveLimitsFromEnv, extractPackArchive, type ArchiveLimits, type ExtractedArchive } from './archive.js'
export { DIGEST_RE, PackContent, type IngestedPack } from './content.js'
