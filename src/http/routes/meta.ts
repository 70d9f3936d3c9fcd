import { z } from 'zod'
import type { App } from '../app.js'
import type { AppDeps } from '../deps.js'

/** Health (no token) and the OpenAPI document. */
export function metaRoutes(app: App, deps: AppDeps): void {
  app.get(
    '/health',
    {
      schema: {
        summary: 'liveness (no token needed)',
        tags: ['meta'],
        security: [],
        response: { 200: z.object({ status: z.literal('ok'), version: z.string() }) },
      },
    },
    async () => ({ status: 'ok' as const, version: deps.version }),
  )
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger())
}
