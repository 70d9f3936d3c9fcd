import { z } from 'zod'
import { Params, type Api } from '../api.js'
import type { App } from '../app.js'
import { callerOf } from '../caller.js'

/** Tokens (admin) and whoami over HTTP (docs/API.md "Tokens"): each route maps onto one protocol command. */

export function tokenRoutes(app: App, api: Api): void {
  app.post(
    '/tokens',
    { schema: { summary: 'token.create', tags: ['tokens'], body: Params['token.create'] } },
    async (req, reply) => reply.status(201).send(await api['token.create'](req.body, callerOf(req))),
  )
  app.get('/tokens', { schema: { summary: 'token.list', tags: ['tokens'] } }, async (req) =>
    api['token.list']({}, callerOf(req)),
  )
  app.delete(
    '/tokens/:id',
    { schema: { summary: 'token.revoke', tags: ['tokens'], params: z.object({ id: z.string().min(1).max(200) }) } },
    async (req) => api['token.revoke']({ tokenId: req.params.id }, callerOf(req)),
  )
  app.get('/whoami', { schema: { summary: 'whoami', tags: ['tokens'] } }, async (req) => api.whoami({}, callerOf(req)))
}
