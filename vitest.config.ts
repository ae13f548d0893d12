import { defineConfig } from 'vitest/config'

// Four tiers (see test/README.md): unit tests next to each module's name under test/,
// e2e tests that spawn the real `corral` binary, the chaos suite (kill -9 and database restarts
// of that binary), and the Postgres runs of the store/audit/auth suites, which loop over
// `testDialects()` and join in whenever CORRAL_TEST_PG_URL is set.
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/**/*.test.ts'],
          exclude: ['test/e2e/**', 'test/chaos/**'],
        },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          fileParallelism: false,
        },
      },
      {
        // kill -9 and database restarts of the real binary (docs/reliability.md, "Chaos suite"):
        // one file at a time, they load the machine on purpose.
        extends: true,
        test: {
          name: 'chaos',
          include: ['test/chaos/**/*.test.ts'],
          fileParallelism: false,
          testTimeout: 90_000,
        },
      },
    ],
  },
})
