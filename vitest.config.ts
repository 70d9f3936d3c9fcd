import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // the same suites on a real PostgreSQL server: `npm run test:postgres` (vitest.postgres.config.ts)
    exclude: ['test/**/*.postgres.test.ts', 'node_modules/**'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
  },
})
