import { defineConfig } from 'vitest/config'

// Three tiers (see docs/testing.md): unit tests next to each module's name under test/,
// e2e tests that spawn the real `corral` binary, and the Postgres runs of the store/audit/auth
// suites, which loop over `testDialects()` and join in whenever CORRAL_TEST_PG_URL is set.
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
          exclude: ['test/e2e/**'],
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
    ],
  },
})
