// The audit sinks an operator configured (CORRAL_AUDIT_OTLP_*, CORRAL_AUDIT_OCSF_*; docs/audit.md
// "OTLP streaming"): one shipper per sink on every replica, of which the lease lets one ship at a time.
import type { Logger } from 'pino'
import { AuditShipper, type AuditSinkConfig } from '../audit/index.js'
import type { Store } from '../store/index.js'
import type { Teardown } from './teardown.js'

export interface AuditSinkSettings {
  sinks: readonly AuditSinkConfig[]
  /** deployment.environment.name on every OTLP resource (CORRAL_DEPLOYMENT). */
  deployment: string | undefined
}

/** The lease TTL is the replicas' (CORRAL_LEASE_TTL): how long a sink waits for a replica that died holding it. */
export function startAuditSinks(settings: AuditSinkSettings, store: Store, replica: { id: string; ttlMs: number }, logger: Logger, teardown: Teardown): AuditShipper[] {
  const replicaId = replica.id
  const shippers = settings.sinks.map((sink) => new AuditShipper({
    store, sink, holder: replicaId, logger, leaseTtlMs: replica.ttlMs,
    resource: { instanceId: replicaId, ...(settings.deployment ? { deployment: settings.deployment } : {}) },
  }))
  for (const s of shippers) s.start()
  if (shippers.length) teardown.add('audit sinks', () => Promise.all(shippers.map((s) => s.stop())).then(() => undefined))
  return shippers
}
