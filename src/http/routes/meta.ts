import type { App } from '../app.js'
import type { AppDeps } from '../deps.js'
import { Answers, ok, problem, problems } from '../openapi.js'

/** Health (no token) and the OpenAPI document. */
export function metaRoutes(app: App, deps: AppDeps): void {
  app.get(
    '/health',
    {
      schema: {
        operationId: 'getHealth',
        summary: 'liveness (no token needed); `degraded` with the reason when appends cannot commit',
        tags: ['meta'],
        security: [],
        response: {
          200: ok('the server is up', Answers.health),
          403: problem('FORBIDDEN: a foreign Origin or Host'),
          500: problem('INTERNAL: a bug (logged, never detailed)'),
        },
      },
    },
    // Alive either way; `degraded` says why appends fail now (a full disk), so an operator sees it at once.
    async () => {
      const full = deps.storageFull?.()
      if (!full) return { status: 'ok' as const, version: deps.version }
      return {
        status: 'degraded' as const,
        version: deps.version,
        reason: `STORAGE_FULL: the data directory's filesystem is full since ${full.since}; appends are refused until there is space`,
      }
    },
  )
  // Described, but left out of the document it serves (test/http/routes.test.ts pins the document's paths).
  app.get(
    '/openapi.json',
    {
      schema: {
        hide: true,
        operationId: 'getOpenApi',
        summary: 'this OpenAPI 3 document',
        tags: ['meta'],
        response: { 200: ok('the OpenAPI 3 document of the HTTP routes', Answers.openapi), ...problems({}) },
      },
    },
    async () => app.swagger(),
  )
}
