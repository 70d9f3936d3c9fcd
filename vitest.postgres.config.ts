import { defineConfig } from 'vitest/config'

/**
 * `npm run test:postgres`: the suites that touch the store, on a real
 * PostgreSQL server each file starts (test/support/postgres.ts: Debian's
 * postgresql package, which .ci/run installs; CHRONICLE_TEST_DATABASE_URL
 * names an existing server instead).
 */
export default defineConfig({
  test: {
    include: ['test/**/*.postgres.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
})
