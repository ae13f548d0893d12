export { DEFAULT_RESOLVER_LIMITS, WorkspaceResolver, lookupName, type LookupHooks, type LookupVerdict, type Outcome, type ResolverLimits } from './resolver.js'
export { serveDnsStream } from './stream.js'
export { SYNTHETIC_CIDR, SyntheticTable, isSynthetic } from './synthetic.js'
