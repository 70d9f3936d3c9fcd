import { z } from 'zod'
import { ChronicleError } from '../../events/errors.js'
import type { App } from '../app.js'
import { principalOf } from '../caller.js'
import type { ClusterPort } from '../deps.js'
import { ok, problems } from '../openapi.js'

const ClusterNodeAnswer = z.object({
  id: z.string(),
  name: z.string(),
  address: z.string().nullable(),
  startedAt: z.number(),
  heartbeatAgeMs: z.number(),
  alive: z.boolean(),
  stopped: z.boolean(),
  sessions: z.number(),
})

/**
 * `GET /cluster` (admin): the nodes on this server's database, their heartbeats and how many sessions each
 * owns (docs/CLUSTER.md). A server that is not a cluster's node answers NOT_FOUND.
 */
export function clusterRoutes(app: App, cluster: ClusterPort | undefined): void {
  app.get(
    '/cluster',
    {
      // Out of the OpenAPI document, whose every operation its conformance suite calls on one server of its
      // own; docs/API.md "GET /cluster" describes it, and test/cluster/ calls it on real nodes.
      schema: {
        hide: true,
        operationId: 'clusterNodes',
        summary: 'cluster nodes',
        description:
          "The cluster's nodes as its database records them: each one's heartbeat age, whether it is alive and " +
          'how many sessions it owns; `node` is the id of the node that answers.',
        tags: ['admin'],
        response: {
          200: ok('the nodes', z.object({ node: z.string(), nodes: z.array(ClusterNodeAnswer) })),
          ...problems({
            403: 'FORBIDDEN: the token is not an admin, or is limited to some sessions',
            404: 'NOT_FOUND: this server is not a node of a cluster',
          }),
        },
      },
    },
    async (req) => {
      const principal = principalOf(req)
      if (principal.role !== 'admin' || principal.sessions)
        throw new ChronicleError('FORBIDDEN', 'the cluster is for an admin token that reaches every session')
      if (!cluster) throw new ChronicleError('NOT_FOUND', 'this server is not a node of a cluster (docs/CLUSTER.md)')
      return { node: cluster.node, nodes: await cluster.nodes() }
    },
  )
}
