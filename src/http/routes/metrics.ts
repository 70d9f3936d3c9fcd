import { ChronicleError } from '../../events/errors.js'
import type { App } from '../app.js'
import { principalOf } from '../caller.js'
import type { MetricsPort } from '../deps.js'

/**
 * `GET /metrics`: the Prometheus text (docs/OBSERVABILITY.md), for an admin
 * token that reaches every session — the counts are the whole server's. A
 * scraper that should hold no token reads the separate address the user's
 * config names (`metrics.listen`) instead.
 */
export function metricsRoutes(app: App, metrics: MetricsPort): void {
  // Out of the OpenAPI document, whose answers are JSON: this one is Prometheus text (docs/API.md "GET /metrics").
  app.get('/metrics', { schema: { hide: true } }, async (req, reply) => {
    const principal = principalOf(req)
    if (principal.role !== 'admin' || principal.sessions)
      throw new ChronicleError('FORBIDDEN', 'metrics are for an admin token that reaches every session')
    const text = await metrics.render()
    return reply.type(metrics.contentType).send(text)
  })
}
