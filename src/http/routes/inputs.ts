import { callerOf } from '../caller.js'
import { z } from 'zod'
import { Params, type Api } from '../api.js'
import type { App } from '../app.js'
import type { AppDeps } from '../deps.js'
import { Answers, ok, problems } from '../openapi.js'

/** Input, cancel and permissions over HTTP. */

const Id = z.object({ id: z.string().min(1).max(200) })
const INVALID = 'BAD_REQUEST: the path, query or body does not match its schema'
const WRITABLE = 'SESSION_ARCHIVED, SESSION_READ_ONLY (imported history) or VERSION_CONFLICT'

export function inputRoutes(app: App, api: Api, deps: AppDeps, closing: AbortSignal): void {
  app.post(
    '/sessions/:id/inputs',
    {
      schema: {
        operationId: 'submitInput',
        summary: 'input.submit',
        description:
          'Accepts an input (202, once durable). With ?wait=true, answers when the run ends with the final assistant message (200), or 202 if the server shuts down first.',
        tags: ['inputs'],
        params: Id,
        querystring: z.object({ wait: z.enum(['true', 'false']).optional() }),
        body: Params['input.submit'].omit({ session: true }),
        response: {
          200: ok('?wait=true: the run ended; its final assistant message and how it ended', Answers.answered),
          202: ok('accepted and durable (or a duplicate of an input accepted before)', Answers.accepted),
          ...problems(
            {
              400: `${INVALID}; EMPTY_INPUT; NOT_A_FILE: a file part naming a directory`,
              403: 'FILE_FORBIDDEN: a file part outside the session directory or into the data dir',
              404: 'SESSION_NOT_FOUND, or FILE_NOT_FOUND: a file part naming no file',
              409: `INPUT_CONFLICT: the inputId with other content; SESSION_BUSY; ${WRITABLE}`,
              413: 'PAYLOAD_TOO_LARGE: input over limits.inputBytes, or a file part over limits.fileBytes',
              415: 'UNSUPPORTED_MEDIA_TYPE: a file neither text, an image nor a PDF',
              422: 'UNKNOWN_AGENT or UNKNOWN_MODEL',
            },
            { body: true },
          ),
        },
      },
    },
    async (req, reply) => {
      const accepted = (await api['input.submit']({ session: req.params.id, ...req.body }, callerOf(req))) as {
        inputId: string
        seq: number
        duplicate: boolean
      }
      if (req.query.wait !== 'true' || req.body.noReply || closing.aborted) return reply.status(202).send(accepted)
      let onShutdown = () => {}
      const shutdown = new Promise<void>((resolve) => {
        onShutdown = resolve
        closing.addEventListener('abort', onShutdown, { once: true })
      })
      try {
        await Promise.race([deps.runtime?.idle(req.params.id, accepted), shutdown])
      } finally {
        closing.removeEventListener('abort', onShutdown) // many requests may wait at once: no listener leak
      }
      // A shutdown stops the run at a safe point, open in the log (whichever of the two the race heard first): it
      // continues after a restart (recovery); closing the connection lets the shutdown finish now.
      const open = Boolean((await deps.ports.readModels.session(req.params.id))?.run)
      if (closing.aborted || open) return reply.status(202).header('connection', 'close').send(accepted)
      return reply.status(200).send({ ...accepted, ...(await finalAnswer(deps, req.params.id)) })
    },
  )
  app.post(
    '/sessions/:id/cancel',
    {
      schema: {
        operationId: 'cancelRun',
        summary: 'run.cancel',
        tags: ['inputs'],
        params: Id,
        response: {
          200: ok('whether a run was cancelled', Answers.cancelled),
          ...problems({ 400: INVALID, 404: 'SESSION_NOT_FOUND', 409: WRITABLE }, { body: true }),
        },
      },
    },
    async (req) => api['run.cancel']({ session: req.params.id }, callerOf(req)),
  )
  app.post(
    '/sessions/:id/permissions/:requestId',
    {
      schema: {
        operationId: 'replyPermission',
        summary: 'permission.reply',
        tags: ['permissions'],
        params: z.object({ id: z.string().min(1).max(200), requestId: z.string().min(1).max(200) }),
        body: Params['permission.reply'].pick({ reply: true, message: true }),
        response: {
          200: ok('answered', Answers.empty),
          ...problems(
            { 400: INVALID, 404: 'SESSION_NOT_FOUND or PERMISSION_REQUEST_NOT_FOUND', 409: WRITABLE },
            { body: true },
          ),
        },
      },
    },
    async (req) =>
      api['permission.reply']({ session: req.params.id, requestId: req.params.requestId, ...req.body }, callerOf(req)),
  )
  app.get(
    '/sessions/:id/rules',
    {
      schema: {
        operationId: 'listPermissionRules',
        summary: 'permission.rules',
        description:
          '`rules`: added by "always" replies, each revocable; `configured`: those the session was created with.',
        tags: ['permissions'],
        params: Id,
        response: {
          200: ok('the session’s rules', Answers.rules),
          ...problems({ 400: INVALID, 404: 'SESSION_NOT_FOUND' }),
        },
      },
    },
    async (req) => api['permission.rules']({ session: req.params.id }, callerOf(req)),
  )
  app.delete(
    '/sessions/:id/rules/:ruleId',
    {
      schema: {
        operationId: 'revokePermissionRule',
        summary: 'permission.revoke',
        tags: ['permissions'],
        params: z.object({ id: z.string().min(1).max(200), ruleId: z.string().min(1).max(200) }),
        response: {
          200: ok('revoked', Answers.empty),
          ...problems({ 400: INVALID, 404: 'SESSION_NOT_FOUND or RULE_NOT_FOUND', 409: WRITABLE }, { body: true }),
        },
      },
    },
    async (req) => api['permission.revoke']({ session: req.params.id, ruleId: req.params.ruleId }, callerOf(req)),
  )
}

/** The session's last assistant message with its parts, and how its run ended. */
async function finalAnswer(deps: AppDeps, sessionId: string) {
  const { readModels } = deps.ports
  const session = await readModels.session(sessionId)
  const message = (await readModels.messages(sessionId)).filter((m) => m.role === 'assistant').at(-1)
  const parts = message ? await readModels.parts(sessionId, message.id) : []
  const text = parts.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('')
  return {
    outcome: session?.lastRun?.outcome ?? null,
    error: session?.lastRun?.error ?? null,
    message: message ?? null,
    parts,
    text,
  }
}
