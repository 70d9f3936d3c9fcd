import { Params, type Api } from '../api.js'
import type { App } from '../app.js'
import { callerOf } from '../caller.js'
import { Answers, ok, problems } from '../openapi.js'

/** Full-text search over HTTP (docs/SEARCH.md): the `search` command, its params in the query string. */
export function searchRoutes(app: App, api: Api): void {
  app.get(
    '/search',
    {
      schema: {
        operationId: 'search',
        summary: 'search',
        description:
          'Every session the token reaches, newest first (or `order=relevance`); `cursor` is there when more remain. `indexedThrough` says how far into the log the index has read.',
        tags: ['search'],
        querystring: Params.search,
        response: {
          200: ok('a page of hits', Answers.search),
          ...problems({
            400: 'BAD_QUERY: the query does not parse (details.position: where); BAD_REQUEST: the query string does not match its schema, or a cursor this server did not give',
            503: 'SEARCH_UNAVAILABLE: the index is being created or its worker stopped',
          }),
        },
      },
    },
    async (req) => api.search(req.query, callerOf(req)),
  )
}
