// The layout of docs/design.md as rules: `npm run lint:arch` (depcruise src) prints every import
// that breaks one of them and exits non-zero. A part is a top-level folder of src/; the arrows it
// may draw are the ones docs/design.md "Layout" lists. Type-only imports count (tsPreCompilationDeps):
// a type is a dependency on the words of another part just as much as a value is.

/** Paths of the top-level parts of src/, as one regex alternative. */
const parts = (...names) => `^src/(${names.join('|')})/`

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'A file cycle (type-only imports included): neither file can be read, tested or moved alone.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-folder-cycle',
      comment: 'Folders are the architecture: a cycle between two folders means neither is a layer.',
      severity: 'error',
      scope: 'folder',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'contract-is-a-leaf',
      comment: 'src/contract/ is the shared vocabulary every part imports; it imports no part back.',
      severity: 'error',
      from: { path: '^src/contract/' },
      to: { path: '^src/', pathNot: '^src/contract/' },
    },
    {
      name: 'contract-needs-no-packages',
      comment: 'The contract stays cheap to load anywhere (client, agent): node built-ins and uuid (ids) only.',
      severity: 'error',
      from: { path: '^src/contract/' },
      to: { dependencyTypes: ['npm', 'npm-dev', 'npm-optional', 'npm-peer', 'npm-no-pkg', 'npm-unknown'], pathNot: '(^|/)node_modules/(uuid|json-schema-to-ts)/' },
    },
    {
      name: 'contract-derives-wire-types-at-compile-time',
      // src/contract/wire.ts derives the wire types from its schemas with json-schema-to-ts's
      // FromSchema: a type, erased at build, so the contract loads no more at run time.
      comment: 'src/contract/ takes json-schema-to-ts as types only.',
      severity: 'error',
      from: { path: '^src/contract/' },
      to: { path: '(^|/)node_modules/json-schema-to-ts/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'contract-vocabularies-import-nothing',
      comment: 'src/contract/resources.ts and audit-vocabulary.ts (the enums, the contract files the console and the agent load alone) import nothing at all.',
      severity: 'error',
      from: { path: '^src/contract/(resources|audit-vocabulary)\\.ts$' },
      to: {},
    },
    {
      name: 'only-the-store-speaks-sql',
      // Everything else asks the store's face: a repository for a read, store.capabilities for what
      // the dialect can do, defaultStoreUrl / storeFiles / storeServer for what a URL names.
      comment: 'Only src/store/ imports the SQL builder and the database drivers (kysely, pg, better-sqlite3).',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/store/' },
      to: { path: '(^|/)node_modules/(kysely|pg|pg-[^/]+|@types/pg|better-sqlite3|@types/better-sqlite3)/' },
    },
    {
      name: 'net-is-a-leaf',
      // The proxy dials upstreams and the OAuth client (src/secrets/oauth/) reaches providers through
      // the same address guard; it lives below both so neither imports the other (docs/design.md).
      comment: 'src/net/ (which addresses serve may connect to) imports no other part of src/.',
      severity: 'error',
      from: { path: '^src/net/' },
      to: { path: '^src/', pathNot: '^src/net/' },
    },
    {
      name: 'dns-is-a-leaf',
      // The workspace resolver (synthetic addresses, DNS on the wire) knows no policy, store or
      // socket owner: the proxy hands it the verdict and the row writer (docs/design.md).
      comment: 'src/dns/ (the per-workspace resolver) imports no other part of src/ but the contract.',
      severity: 'error',
      from: { path: '^src/dns/' },
      to: { path: '^src/', pathNot: '^src/(dns|contract)/' },
    },
    {
      name: 'proc-is-a-leaf',
      // Process liveness (is the pid in a lock still its writer?) is asked by the audit journal, the
      // data-dir lock, the cgroup sweep and `corral dev`; it lives below all of them.
      comment: 'src/proc/ (process facts from /proc) imports no other part of src/.',
      severity: 'error',
      from: { path: '^src/proc/' },
      to: { path: '^src/', pathNot: '^src/proc/' },
    },
    {
      name: 'policy-is-pure',
      comment: 'caps.yaml parse/validate/compile does no I/O: it imports no part that touches a database, a socket, a sandbox or the terminal.',
      severity: 'error',
      from: { path: '^src/policy/' },
      to: { path: parts('store', 'server', 'proxy', 'audit', 'cli', 'commands', 'workspaces', 'runtime', 'secrets', 'serve', 'packs', 'client', 'agent') },
    },
    {
      name: 'store-is-below-the-services',
      comment: 'The store holds every SQL statement and serves everyone above it; it never calls up into them.',
      severity: 'error',
      from: { path: '^src/store/' },
      to: { path: parts('server', 'proxy', 'workspaces', 'runtime', 'serve') },
    },
    {
      name: 'server-not-to-proxy',
      comment: 'The API and the proxy meet in src/serve/, the store and the audit bus, never directly.',
      severity: 'error',
      from: { path: '^src/server/' },
      to: { path: '^src/proxy/' },
    },
    {
      name: 'proxy-not-to-server',
      comment: 'The API and the proxy meet in src/serve/, the store and the audit bus, never directly.',
      severity: 'error',
      from: { path: '^src/proxy/' },
      to: { path: '^src/server/' },
    },
    {
      name: 'workspaces-not-to-proxy-or-server',
      // What the lifecycle used to take from the proxy now reaches it another way: the callback
      // host, the token claims and the handler interface it implements are src/contract/'s; the
      // token minter (src/secrets/ CapabilityTokens) and the CA certificate path (a string) are
      // handed in by src/serve/. Nothing of the proxy or the API is left for it to import.
      comment: 'src/workspaces/ imports runtime, policy, audit, store and contract (docs/design.md "Layout"); it meets the proxy and the API in src/serve/, never directly.',
      severity: 'error',
      from: { path: '^src/workspaces/' },
      // The agent is a separate program: the task it is handed is the contract's AgentTask.
      to: { path: parts('proxy', 'server', 'serve', 'agent', 'client', 'cli', 'commands', 'dev') },
    },
    {
      name: 'client-and-agent-speak-http-only',
      comment: 'The /v1 client and the in-sandbox agent reach the control plane over HTTP, so they import none of its parts.',
      severity: 'error',
      from: { path: parts('client', 'agent') },
      to: { path: parts('store', 'server', 'proxy', 'serve') },
    },
    {
      name: 'runtime-is-drivers-only',
      comment: 'Drivers do what src/workspaces/ tells them; they never call up into the lifecycle, the API or the proxy.',
      severity: 'error',
      from: { path: '^src/runtime/' },
      to: { path: parts('server', 'workspaces', 'serve', 'proxy') },
    },
    {
      name: 'drivers-register-through-the-registry',
      severity: 'error',
      comment: "A runtime driver (a *-runtime.ts file under src/runtime/, or the kubernetes/ folder's face) is built by its registration in src/runtime/registry.ts and by nothing else; drivers may extend a shared base. Types may be named anywhere (docs/design.md \"How to add a runtime\").",
      from: { path: '^src/', pathNot: ['^src/runtime/registry\\.ts$', '^src/runtime/.*-runtime\\.ts$', '^src/runtime/kubernetes/index\\.ts$'] },
      to: { path: ['^src/runtime/.*-runtime\\.ts$', '^src/runtime/kubernetes/index\\.ts$'], dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'secrets-below-server-and-proxy',
      comment: 'src/secrets/ (sealing, org material, minting) is used by the API and the proxy; it imports only contract, store and audit, never its users.',
      severity: 'error',
      from: { path: '^src/secrets/' },
      to: { path: parts('server', 'proxy', 'workspaces', 'runtime', 'serve', 'packs', 'policy', 'cli', 'commands', 'client', 'agent') },
    },
    {
      name: 'dev-is-a-separate-server',
      comment: 'src/dev/ (corral dev\'s fake model, its script and the demo seed) is a separate HTTP server and an API client; the dev command wires it to serve.',
      severity: 'error',
      from: { path: '^src/dev/' },
      to: { path: parts('server', 'proxy', 'store', 'serve', 'workspaces', 'runtime', 'audit', 'secrets', 'packs', 'cli', 'commands') },
    },
    {
      name: 'routes-stand-alone',
      comment: 'A route file is parse → service → render; what two routes share lives beside routes/ in src/server/ (or in a service), never in another route file. routes/index.ts registers them all.',
      severity: 'error',
      from: { path: '^src/server/routes/', pathNot: '^src/server/routes/index\\.ts$' },
      to: { path: '^src/server/routes/' },
    },
    {
      name: 'only-commands-import-serve',
      comment: 'src/serve/ is the composition root: it knows every part; only the serve/proxy commands start it.',
      severity: 'error',
      from: { path: '^src/', pathNot: parts('commands', 'serve') },
      to: { path: '^src/serve/' },
    },
    {
      name: 'import-through-index',
      // The console is the exception: it may not load the contract's face at run time (rules below),
      // so it names src/contract/resources.ts and audit-vocabulary.ts itself for the enums it lists.
      comment: "A folder's index.ts is its face: another folder imports from it, never from the files behind it.",
      severity: 'error',
      from: { path: '^src/([^/]+)/', pathNot: ['^src/commands/', '^src/agent/', '^src/console/'] },
      to: { path: '^src/[^/]+/', pathNot: ['^src/$1/', '^src/[^/]+/index\\.tsx?$'] },
    },
    {
      name: 'agent-imports-its-task-words-only',
      // One exception to import-through-index, for start-up time: the agent starts once per task,
      // and the contract's face loads uuid (~15 ms). The agent may name src/contract/agent-task.ts
      // itself, and no other file behind a face.
      comment: 'src/agent/ reaches the contract through its index.ts, except agent-task.ts (its own wire shape) and resources.ts (the enums, no imports).',
      severity: 'error',
      from: { path: '^src/agent/' },
      to: { path: '^src/[^/]+/', pathNot: ['^src/agent/', '^src/[^/]+/index\\.tsx?$', '^src/contract/(agent-task|resources)\\.ts$'] },
    },
    {
      name: 'commands-import-through-index',
      // Two exceptions, both for start-up time (oclif loads one command per process; bench:cli):
      // src/cli/ is the commands' own toolkit and has no index.ts on purpose (a barrel would make
      // every command load every helper: ink and react for `task watch`, the policy compiler for
      // `caps lint`); and a command may lazy-load (`await import(...)`, at run time) the one file it
      // needs behind a face, because a face can cost a second (proxy/index.ts loads the whole proxy).
      comment: "A command imports another part through its index.ts; src/cli/ files directly; a dynamic import may name one file.",
      severity: 'error',
      from: { path: '^src/commands/' },
      to: { path: '^src/[^/]+/', pathNot: ['^src/(commands|cli)/', '^src/[^/]+/index\\.tsx?$'], dependencyTypesNot: ['dynamic-import'] },
    },
    {
      name: 'console-is-a-browser-app',
      // The web console (src/console/) runs in a browser and talks to serve over /v1 only, like any
      // other API client; from the rest of src/ it may take the contract's words as types, nothing
      // that would run (src/client/'s face loads node:fs, so the console has its own fetch client),
      // except the vocabularies' arrays (src/contract/resources.ts and audit-vocabulary.ts: constants,
      // no imports), which its filters and forms list.
      comment: 'src/console/ imports no other part of src/, except types from src/contract/index.ts and the enums of src/contract/resources.ts and audit-vocabulary.ts.',
      severity: 'error',
      from: { path: '^src/console/' },
      to: { path: '^src/', pathNot: '^src/(console/|contract/(index|resources|audit-vocabulary)\\.ts$)' },
    },
    {
      name: 'console-takes-only-types-from-contract',
      comment: 'What the console takes from src/contract/ is types (erased at build), so no server code is bundled.',
      severity: 'error',
      from: { path: '^src/console/' },
      to: { path: '^src/contract/', pathNot: '^src/contract/(resources|audit-vocabulary)\\.ts$', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'console-runs-in-a-browser',
      comment: 'No node built-ins in the console bundle (its build config, vite.config.ts, runs in node).',
      severity: 'error',
      from: { path: '^src/console/', pathNot: '^src/console/vite\\.config\\.ts$' },
      to: { dependencyTypes: ['core'] },
    },
    {
      name: 'nothing-imports-the-console',
      comment: 'The console is a separate program built by vite; serve serves its built files (src/server/console.ts) and imports none of its code.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/console/' },
      to: { path: '^src/console/' },
    },
    {
      name: 'not-to-unresolvable',
      comment: 'An import the cruiser cannot resolve would hide its arrow from every rule above.',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      mainFields: ['module', 'main', 'types', 'typings'],
    },
    reporterOptions: {
      text: { highlightFocused: true },
    },
  },
}
