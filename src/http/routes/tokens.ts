import { z } from 'zod'
import { Params, type Api } from '../api.js'
import type { App } from '../app.js'
import { callerOf } from '../caller.js'
import { Answers, ok, problems } from '../openapi.js'

/** Tokens (admin) and whoami over HTTP (docs/API.md "Tokens"): each route maps onto one protocol command. */

const INVALID = 'BAD_REQUEST: the path or body does not match its schema'

export function tokenRoutes(app: App, api: Api): void {
  app.post(
    '/tokens',
    {
      schema: {
        operationId: 'createToken',
        summary: 'token.create',
        description: 'A named token with a role; its secret (`token`) is answered this once.',
        tags: ['tokens'],
        body: Params['token.create'],
        response: {
          201: ok('the new token, with its secret', Answers.tokenCreated),
          ...problems(
            {
              400: `${INVALID}; an unknown role, or an expiry that is not a duration or ISO time, or is past`,
              409: 'TOKEN_NAME_TAKEN: an active token has the name',
            },
            { body: true },
          ),
        },
      },
    },
    async (req, reply) => reply.status(201).send(await api['token.create'](req.body, callerOf(req))),
  )
  app.get(
    '/tokens',
    {
      schema: {
        operationId: 'listTokens',
        summary: 'token.list',
        tags: ['tokens'],
        response: { 200: ok('every named token, never a secret', Answers.tokens), ...problems({}) },
      },
    },
    async (req) => api['token.list']({}, callerOf(req)),
  )
  app.delete(
    '/tokens/:id',
    {
      schema: {
        operationId: 'revokeToken',
        summary: 'token.revoke',
        tags: ['tokens'],
        params: z.object({ id: z.string().min(1).max(200) }),
        response: {
          200: ok('the token, with revokedAt', Answers.token),
          ...problems(
            {
              400: INVALID,
              403: "the owner's token cannot be revoked",
              404: 'TOKEN_NOT_FOUND',
              409: 'TOKEN_REVOKED: already revoked',
            },
            { body: true },
          ),
        },
      },
    },
    async (req) => api['token.revoke']({ tokenId: req.params.id }, callerOf(req)),
  )
  app.get(
    '/whoami',
    {
      schema: {
        operationId: 'whoami',
        summary: 'whoami',
        tags: ['tokens'],
        response: { 200: ok('who the presented token speaks for', Answers.whoami), ...problems({}) },
      },
    },
    async (req) => api.whoami({}, callerOf(req)),
  )
}
