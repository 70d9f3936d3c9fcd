import { callerOf } from '../caller.js'
import { z } from 'zod'
import { Params, type Api } from '../api.js'
import type { App } from '../app.js'

/** Session lifecycle and time travel over HTTP: each route maps onto one protocol command. */

const Id = z.object({ id: z.string().min(1).max(200) })
const AtQuery = z.object({ at: z.coerce.number().int().nonnegative().optional() })

export function sessionRoutes(app: App, api: Api): void {
  app.post(
    '/sessions',
    { schema: { summary: 'session.create', tags: ['sessions'], body: Params['session.create'].nullish() } },
    async (req, reply) => reply.status(201).send(await api['session.create'](req.body ?? {}, callerOf(req))),
  )
  app.get(
    '/sessions',
    { schema: { summary: 'session.list', tags: ['sessions'], querystring: Params['session.list'] } },
    async (req) => api['session.list'](req.query, callerOf(req)),
  )
  app.get('/sessions/:id', { schema: { summary: 'session.get', tags: ['sessions'], params: Id } }, async (req) =>
    api['session.get']({ session: req.params.id }, callerOf(req)),
  )
  app.delete('/sessions/:id', { schema: { summary: 'session.archive', tags: ['sessions'], params: Id } }, async (req) =>
    api['session.archive']({ session: req.params.id }, callerOf(req)),
  )
  app.post(
    '/sessions/:id/fork',
    {
      schema: {
        summary: 'session.fork',
        tags: ['time travel'],
        params: Id,
        body: Params['session.fork'].omit({ session: true }),
      },
    },
    async (req, reply) =>
      reply.status(201).send(await api['session.fork']({ session: req.params.id, ...req.body }, callerOf(req))),
  )
  app.get(
    '/sessions/:id/state',
    { schema: { summary: 'session.state', tags: ['time travel'], params: Id, querystring: AtQuery } },
    async (req) => api['session.state']({ session: req.params.id, ...req.query }, callerOf(req)),
  )
  app.get(
    '/sessions/:id/context',
    { schema: { summary: 'session.context', tags: ['time travel'], params: Id, querystring: AtQuery } },
    async (req) => api['session.context']({ session: req.params.id, ...req.query }, callerOf(req)),
  )
  app.get(
    '/sessions/:id/events',
    {
      schema: {
        summary: 'session.history',
        tags: ['time travel'],
        params: Id,
        querystring: Params['session.history'].omit({ session: true }),
      },
    },
    async (req) => api['session.history']({ session: req.params.id, ...req.query }, callerOf(req)),
  )
  app.get(
    '/sessions/:id/files',
    {
      schema: {
        summary: 'session.files',
        description: "The workspace at a seq (default: now): every file, or one file's content with ?path=.",
        tags: ['time travel'],
        params: Id,
        querystring: Params['session.files'].omit({ session: true }),
      },
    },
    async (req) => api['session.files']({ session: req.params.id, ...req.query }, callerOf(req)),
  )
  app.get(
    '/sessions/:id/diff',
    {
      schema: {
        summary: 'session.diff',
        description: 'The unified diff of the workspace between two seqs.',
        tags: ['time travel'],
        params: Id,
        querystring: Params['session.diff'].omit({ session: true }),
      },
    },
    async (req) => api['session.diff']({ session: req.params.id, ...req.query }, callerOf(req)),
  )
  app.post(
    '/sessions/:id/revert',
    {
      schema: {
        summary: 'session.revert',
        description:
          'Brings the session directory back to the workspace at seq `to` and hides later messages from the model. WORKSPACE_CONFLICT lists files changed outside the agent unless `force`.',
        tags: ['time travel'],
        params: Id,
        body: Params['session.revert'].omit({ session: true }),
      },
    },
    async (req) => api['session.revert']({ session: req.params.id, ...req.body }, callerOf(req)),
  )
  app.post(
    '/sessions/:id/unrevert',
    {
      schema: {
        summary: 'session.unrevert',
        description: 'Restores what the latest revert replaced, until a new input makes the revert final.',
        tags: ['time travel'],
        params: Id,
        body: Params['session.unrevert'].omit({ session: true }).optional(),
      },
    },
    async (req) => api['session.unrevert']({ session: req.params.id, ...(req.body ?? {}) }, callerOf(req)),
  )
  app.post(
    '/sessions/:id/compact',
    { schema: { summary: 'session.compact', tags: ['sessions'], params: Id } },
    async (req) => api['session.compact']({ session: req.params.id }, callerOf(req)),
  )
}
