// Public API of the caps.yaml compiler. The proxy and the server import from here only.

export { compilePolicy, compilePolicyCached } from './compile.js'
export { AUTH_PROVIDERS, isAuthProvider, type AuthFamily, type AuthPlacement, type AuthProvider, type AuthProviderSlug } from './auth-providers.js'
export { CODES, type Code, type CodeInfo } from './codes.js'
export { normalizeHost } from './glob.js'
export { canonicalPath, targetPath, type PathResult } from './path.js'
export type * from './types.js'
