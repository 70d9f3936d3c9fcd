import { z } from 'zod'
import { callerOf } from '../caller.js'
import { Params, type Api } from '../api.js'
import type { App } from '../app.js'
import { Answers, ok, problems } from '../openapi.js'

/** Answering an MCP server's elicitation over HTTP (docs/API.md; docs/TOOLS.md "Elicitation"). */
export function elicitationRoutes(app: App, api: Api): void {
  app.post(
    '/sessions/:id/elicitations/:elicitationId',
    {
      schema: {
        operationId: 'answerElicitation',
        summary: 'elicitation.answer',
        description:
          'accept (with `content`: the requested schema’s defaults are applied, then it must match the schema), decline or cancel.',
        tags: ['elicitations'],
        params: z.object({ id: z.string().min(1).max(200), elicitationId: z.string().min(1).max(200) }),
        body: Params['elicitation.answer'].pick({ action: true, content: true }),
        response: {
          200: ok('answered', Answers.empty),
          ...problems(
            {
              400: 'BAD_REQUEST: the path or body does not match its schema; ELICITATION_INVALID: the content does not match the requested schema (nothing was appended)',
              404: 'SESSION_NOT_FOUND, or ELICITATION_NOT_FOUND: unknown or already answered',
              409: 'SESSION_ARCHIVED, SESSION_READ_ONLY (imported history) or VERSION_CONFLICT',
            },
            { body: true },
          ),
        },
      },
    },
    async (req) =>
      api['elicitation.answer'](
        { session: req.params.id, elicitationId: req.params.elicitationId, ...req.body },
        callerOf(req),
      ),
  )
}
