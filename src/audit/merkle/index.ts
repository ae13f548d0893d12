// The provable log (docs/audit.md "The provable log"): the leaf encoding, the RFC 9162 tree and
// proofs, signed checkpoints, the witness directory, the appender and checkpointer serve runs,
// verification and the offline bundle.
export { canonicalJson, canonicalRow, rowEncoder, rowLeafHash, storedRowBytes } from './canonical.js'
export {
  CompactRange, consistencyProof, hashChildren, hashLeaf, hashLeafHex, inclusionProof, subtreeRoot, verifyConsistency, verifyInclusion, type Hash,
} from './tree.js'
export {
  checkpointBody, keyHash, openCheckpoint, parseVerifierKey, signCheckpoint, verifierKey,
  type Checkpoint, type NoteResult, type SignedCheckpoint, type VerifierKey,
} from './note.js'
export { LOG_KEY_FILE, LogSigner, loadOrCreateLogKey, logKeyPath, rotateLogKey, type LogKey } from './signer.js'
export { WitnessDir, checkpointFileName } from './witness.js'
export { LOG_ID_SETTING, ProvableLog, logId, logOrigin, type ProvableLogOptions } from './log.js'
export { verifyLog, type Finding, type FindingKind, type LeafEntry, type LeafTally, type VerifyInput, type VerifyReport } from './verify.js'
export { BUNDLE_FORMAT, bundleInput, databaseInput, databaseLeaves, remoteInput, writeBundle, type RemoteLog, type TrustOptions } from './sources.js'
export { inclusionFor, consistencyFor, type InclusionAnswer, type ConsistencyAnswer } from './proofs.js'
