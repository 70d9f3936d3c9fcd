import { z } from 'zod'
import { Params, type Api } from '../api.js'
import type { App } from '../app.js'
import { callerOf } from '../caller.js'
import { loginUrl } from '../login-codes.js'
import { Answers, ok, problems } from '../openapi.js'

/**
 * Share links over HTTP (docs/API.md "Shares"): each route maps onto one
 * protocol command. Creating one answers the link itself, built from the
 * address the request reached: the page's login with the code in the
 * fragment, which a browser never sends to a server.
 */

const INVALID = 'BAD_REQUEST: the path, query or body does not match its schema'
const Id = z.object({ id: z.string().min(1).max(200) })

export function shareRoutes(app: App, api: Api): void {
  app.post(
    '/sessions/:id/shares',
    {
      schema: {
        operationId: 'createShare',
        summary: 'share.create',
        description:
          'A link logging any number of browsers in to the page as a principal limited to this session (its forks and sub-agents), until it expires (default 7d) or is revoked. The link (`url`, `code`) is answered this once.',
        tags: ['shares'],
        params: Id,
        body: Params['share.create'].omit({ session: true }).nullish(),
        response: {
          201: ok('the share, with its link', Answers.shareCreated),
          ...problems(
            {
              400: `${INVALID}; an unknown role, or an expiry that is not a duration or ISO time, or is past`,
              403: 'FORBIDDEN: the caller does not reach the session, or is itself a share',
              404: 'SESSION_NOT_FOUND',
              409: 'SESSION_ARCHIVED; SHARE_NAME_TAKEN: an active share or token has the name',
            },
            { body: true },
          ),
        },
      },
    },
    async (req, reply) => {
      const created = (await api['share.create']({ session: req.params.id, ...req.body }, callerOf(req))) as {
        code: string
      }
      return reply.status(201).send({ ...created, url: loginUrl(`${req.protocol}://${req.host}`, created.code) })
    },
  )
  app.get(
    '/shares',
    {
      schema: {
        operationId: 'listShares',
        summary: 'share.list',
        description: 'The shares of the sessions the caller reaches (`?session=` for one), never a link.',
        tags: ['shares'],
        querystring: Params['share.list'],
        response: { 200: ok('the shares', Answers.shares), ...problems({ 400: INVALID }) },
      },
    },
    async (req) => api['share.list'](req.query, callerOf(req)),
  )
  app.delete(
    '/shares/:id',
    {
      schema: {
        operationId: 'revokeShare',
        summary: 'share.revoke',
        description: 'The link stops working; every page and socket opened with it is closed at once (code 4401).',
        tags: ['shares'],
        params: Id,
        response: {
          200: ok('the share, with revokedAt', Answers.share),
          ...problems(
            {
              400: INVALID,
              403: 'FORBIDDEN: the caller does not reach its session, or is itself a share',
              404: 'SHARE_NOT_FOUND',
              410: 'SHARE_REVOKED: already revoked',
            },
            { body: true },
          ),
        },
      },
    },
    async (req) => api['share.revoke']({ shareId: req.params.id }, callerOf(req)),
  )
}
