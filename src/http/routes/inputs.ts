import { callerOf } from '../caller.js'
import { z } from 'zod'
import { getMessages, getParts, getSession } from '../../projections/read-model.js'
import { Params, type Api } from '../api.js'
import type { App } from '../app.js'
import type { AppDeps } from '../deps.js'

/** Input, cancel and permissions over HTTP. */

const Id = z.object({ id: z.string().min(1).max(200) })

export function inputRoutes(app: App, api: Api, deps: AppDeps, closing: AbortSignal): void {
  app.post(
    '/sessions/:id/inputs',
    {
      schema: {
        summary: 'input.submit',
        description:
          'Accepts an input (202, once durable). With ?wait=true, answers when the run ends with the final assistant message (200), or 202 if the server shuts down first.',
        tags: ['inputs'],
        params: Id,
        querystring: z.object({ wait: z.enum(['true', 'false']).optional() }),
        body: Params['input.submit'].omit({ session: true }),
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
        await Promise.race([deps.runtime?.idle(req.params.id), shutdown])
      } finally {
        closing.removeEventListener('abort', onShutdown) // many requests may wait at once: no listener leak
      }
      // The run continues after a restart (recovery); closing the connection lets the shutdown finish now.
      if (closing.aborted) return reply.status(202).header('connection', 'close').send(accepted)
      return reply.status(200).send({ ...accepted, ...finalAnswer(deps, req.params.id) })
    },
  )
  app.post('/sessions/:id/cancel', { schema: { summary: 'run.cancel', tags: ['inputs'], params: Id } }, async (req) =>
    api['run.cancel']({ session: req.params.id }, callerOf(req)),
  )
  app.post(
    '/sessions/:id/permissions/:requestId',
    {
      schema: {
        summary: 'permission.reply',
        tags: ['permissions'],
        params: z.object({ id: z.string().min(1).max(200), requestId: z.string().min(1).max(200) }),
        body: Params['permission.reply'].pick({ reply: true, message: true }),
      },
    },
    async (req) =>
      api['permission.reply']({ session: req.params.id, requestId: req.params.requestId, ...req.body }, callerOf(req)),
  )
  app.get(
    '/sessions/:id/rules',
    { schema: { summary: 'permission.rules', tags: ['permissions'], params: Id } },
    async (req) => api['permission.rules']({ session: req.params.id }, callerOf(req)),
  )
  app.delete(
    '/sessions/:id/rules/:ruleId',
    {
      schema: {
        summary: 'permission.revoke',
        tags: ['permissions'],
        params: z.object({ id: z.string().min(1).max(200), ruleId: z.string().min(1).max(200) }),
      },
    },
    async (req) => api['permission.revoke']({ session: req.params.id, ruleId: req.params.ruleId }, callerOf(req)),
  )
}

/** The session's last assistant message with its parts, and how its run ended. */
function finalAnswer(deps: AppDeps, sessionId: string) {
  deps.store.flush()
  const session = getSession(deps.store, sessionId)
  const message = getMessages(deps.store, sessionId)
    .filter((m) => m.role === 'assistant')
    .at(-1)
  const parts = message ? getParts(deps.store, sessionId, message.id) : []
  const text = parts.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('')
  return {
    outcome: session?.lastRun?.outcome ?? null,
    error: session?.lastRun?.error ?? null,
    message: message ?? null,
    parts,
    text,
  }
}
