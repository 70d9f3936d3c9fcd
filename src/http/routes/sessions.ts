import { callerOf } from '../caller.js'
import { z } from 'zod'
import { Params, type Api } from '../api.js'
import type { App } from '../app.js'
import { Answers, ok, problems } from '../openapi.js'

/** Session lifecycle and time travel over HTTP: each route maps onto one protocol command. */

const Id = z.object({ id: z.string().min(1).max(200) })
const AtQuery = z.object({ at: z.coerce.number().int().nonnegative().optional() })

const NO_SESSION = 'SESSION_NOT_FOUND'
const NO_SEQ = 'SESSION_NOT_FOUND, or SEQ_OUT_OF_RANGE: a seq not in the session’s history'
const INVALID = 'BAD_REQUEST: the path, query or body does not match its schema'

export function sessionRoutes(app: App, api: Api): void {
  app.post(
    '/sessions',
    {
      schema: {
        operationId: 'createSession',
        summary: 'session.create',
        tags: ['sessions'],
        body: Params['session.create'].nullish(),
        response: {
          201: ok('the new session', Answers.session),
          ...problems(
            {
              400: `${INVALID}; a directory that is not absolute or does not exist; DIRECTORY_FORBIDDEN: inside the data dir`,
              403: 'a token limited to some sessions cannot create one',
              422: 'UNKNOWN_AGENT or UNKNOWN_MODEL',
            },
            { body: true },
          ),
        },
      },
    },
    async (req, reply) => reply.status(201).send(await api['session.create'](req.body ?? {}, callerOf(req))),
  )
  app.get(
    '/sessions',
    {
      schema: {
        operationId: 'listSessions',
        summary: 'session.list',
        description: 'Most recently active first; `cursor` is there when more remain.',
        tags: ['sessions'],
        querystring: Params['session.list'],
        response: {
          200: ok('a page of sessions', Answers.sessions),
          ...problems({ 400: `${INVALID}, or a bad cursor` }),
        },
      },
    },
    async (req) => api['session.list'](req.query, callerOf(req)),
  )
  app.get(
    '/sessions/:id',
    {
      schema: {
        operationId: 'getSession',
        summary: 'session.get',
        tags: ['sessions'],
        params: Id,
        response: { 200: ok('the session', Answers.session), ...problems({ 400: INVALID, 404: NO_SESSION }) },
      },
    },
    async (req) => api['session.get']({ session: req.params.id }, callerOf(req)),
  )
  app.delete(
    '/sessions/:id',
    {
      schema: {
        operationId: 'archiveSession',
        summary: 'session.archive',
        description: 'Archives the session; its log stays.',
        tags: ['sessions'],
        params: Id,
        response: {
          200: ok('archived', Answers.empty),
          ...problems({ 400: INVALID, 404: NO_SESSION, 409: 'VERSION_CONFLICT: a concurrent write' }, { body: true }),
        },
      },
    },
    async (req) => api['session.archive']({ session: req.params.id }, callerOf(req)),
  )
  app.patch(
    '/sessions/:id',
    {
      schema: {
        operationId: 'updateSession',
        summary: 'session.update',
        description: 'Renames (`title`), archives or unarchives (`archived`) the session; what is given changes.',
        tags: ['sessions'],
        params: Id,
        body: Params['session.update'].omit({ session: true }),
        response: {
          200: ok('the session as it is now', Answers.session),
          ...problems(
            {
              400: INVALID,
              404: NO_SESSION,
              409: 'SESSION_READ_ONLY: an imported session is not renamed; VERSION_CONFLICT: a concurrent write',
            },
            { body: true },
          ),
        },
      },
    },
    async (req) => api['session.update']({ session: req.params.id, ...req.body }, callerOf(req)),
  )
  app.post(
    '/sessions/:id/fork',
    {
      schema: {
        operationId: 'forkSession',
        summary: 'session.fork',
        tags: ['time travel'],
        params: Id,
        body: Params['session.fork'].omit({ session: true }),
        response: {
          201: ok('the new session, starting from the state at `at`', Answers.session),
          ...problems(
            {
              400: `${INVALID}; DIRECTORY_REQUIRED: imported history forked without a directory; DIRECTORY_FORBIDDEN`,
              404: NO_SEQ,
              409: 'DIRECTORY_NOT_EMPTY, SESSION_BUSY or WORKSPACE_MISSING',
            },
            { body: true },
          ),
        },
      },
    },
    async (req, reply) =>
      reply.status(201).send(await api['session.fork']({ session: req.params.id, ...req.body }, callerOf(req))),
  )
  app.get(
    '/sessions/:id/state',
    {
      schema: {
        operationId: 'getSessionState',
        summary: 'session.state',
        description:
          'The session, its messages and parts right after event `at` (default: now). With `last`: only the latest `last` messages and their parts, and `messageCount`, how many there are.',
        tags: ['time travel'],
        params: Id,
        querystring: AtQuery.extend({ last: z.coerce.number().int().min(1).max(1_000_000).optional() }),
        response: { 200: ok('the state at the seq', Answers.state), ...problems({ 400: INVALID, 404: NO_SEQ }) },
      },
    },
    async (req) => api['session.state']({ session: req.params.id, ...req.query }, callerOf(req)),
  )
  app.get(
    '/sessions/:id/context',
    {
      schema: {
        operationId: 'getSessionContext',
        summary: 'session.context',
        description:
          'At a step.started seq, the exact request that step sent, rebuilt from the log; else the request the next step would send.',
        tags: ['time travel'],
        params: Id,
        querystring: AtQuery,
        response: {
          200: ok('what the model is (or was) sent', Answers.context),
          ...problems({
            400: INVALID,
            404: NO_SEQ,
            500: 'BLOB_MISSING or BLOB_CORRUPT: a recorded blob is gone or edited',
          }),
        },
      },
    },
    async (req) => api['session.context']({ session: req.params.id, ...req.query }, callerOf(req)),
  )
  app.get(
    '/sessions/:id/events',
    {
      schema: {
        operationId: 'getSessionHistory',
        summary: 'session.history',
        description: 'The log, ascending seq; `next` is the cursor for the following page.',
        tags: ['time travel'],
        params: Id,
        querystring: Params['session.history'].omit({ session: true }),
        response: { 200: ok('a page of events', Answers.history), ...problems({ 400: INVALID, 404: NO_SEQ }) },
      },
    },
    async (req) => api['session.history']({ session: req.params.id, ...req.query }, callerOf(req)),
  )
  app.get(
    '/sessions/:id/export',
    {
      schema: {
        operationId: 'exportSession',
        summary: 'session.export',
        description:
          'The session’s history as `chronicle export` writes it: JSON lines with each event’s hash and the blobs its steps name (`chronicle import` takes the file), a fork’s inherited prefix included. With `?format=atif`: an Agent Trajectory Interchange Format (v1.6) document, a fork’s inherited history included (docs/API.md "ATIF export").',
        tags: ['time travel'],
        params: Id,
        querystring: Params['session.export'].omit({ session: true }),
        response: {
          200: {
            description: 'the export, as a download',
            content: {
              'application/x-ndjson': { schema: z.string() },
              'application/json': {
                schema: z.looseObject({ schema_version: z.string(), steps: z.array(z.unknown()) }),
              },
            },
          },
          ...problems({ 400: INVALID, 404: NO_SESSION, 409: 'NOTHING_TO_EXPORT: ATIF of a session with no message' }),
        },
      },
    },
    async (req, reply) => {
      const answer = (await api['session.export']({ session: req.params.id, ...req.query }, callerOf(req))) as
        | { jsonl: string; atif?: undefined }
        | { atif: { schema_version: string; steps: unknown[] }; jsonl?: undefined }
      const name = req.params.id.replace(/[^\w.-]/g, '_')
      if (answer.atif)
        return reply
          .type('application/json')
          .header('content-disposition', `attachment; filename="${name}.atif.json"`)
          .send(answer.atif)
      return reply
        .type('application/x-ndjson')
        .header('content-disposition', `attachment; filename="${name}.jsonl"`)
        .send(answer.jsonl as string)
    },
  )
  app.get(
    '/sessions/:id/files',
    {
      schema: {
        operationId: 'getSessionFiles',
        summary: 'session.files',
        description: "The workspace at a seq (default: now): every file, or one file's content with ?path=.",
        tags: ['time travel'],
        params: Id,
        querystring: Params['session.files'].omit({ session: true }),
        response: {
          200: ok('the files, or one file', Answers.files),
          ...problems({ 400: INVALID, 404: `${NO_SEQ}; NOT_IN_SNAPSHOT: a path the snapshot does not hold` }),
        },
      },
    },
    async (req) => api['session.files']({ session: req.params.id, ...req.query }, callerOf(req)),
  )
  app.get(
    '/sessions/:id/diff',
    {
      schema: {
        operationId: 'getSessionDiff',
        summary: 'session.diff',
        description: 'The unified diff of the workspace between two seqs.',
        tags: ['time travel'],
        params: Id,
        querystring: Params['session.diff'].omit({ session: true }),
        response: { 200: ok('the diff', Answers.diff), ...problems({ 400: INVALID, 404: NO_SEQ }) },
      },
    },
    async (req) => api['session.diff']({ session: req.params.id, ...req.query }, callerOf(req)),
  )
  app.post(
    '/sessions/:id/revert',
    {
      schema: {
        operationId: 'revertSession',
        summary: 'session.revert',
        description:
          'Brings the session directory back to the workspace at seq `to` and hides later messages from the model. WORKSPACE_CONFLICT lists files changed outside the agent unless `force`.',
        tags: ['time travel'],
        params: Id,
        body: Params['session.revert'].omit({ session: true }),
        response: {
          200: ok('what the revert changed', Answers.restored),
          ...problems(
            {
              400: INVALID,
              404: NO_SEQ,
              409: 'WORKSPACE_CONFLICT, SESSION_BUSY, NO_WORKSPACE_HISTORY, REVERT_BEFORE_COMPACTION, WORKSPACE_MISSING or SESSION_READ_ONLY',
            },
            { body: true },
          ),
        },
      },
    },
    async (req) => api['session.revert']({ session: req.params.id, ...req.body }, callerOf(req)),
  )
  app.post(
    '/sessions/:id/unrevert',
    {
      schema: {
        operationId: 'unrevertSession',
        summary: 'session.unrevert',
        description: 'Restores what the latest revert replaced, until a new input makes the revert final.',
        tags: ['time travel'],
        params: Id,
        body: Params['session.unrevert'].omit({ session: true }).nullish(),
        response: {
          200: ok('what the unrevert changed', Answers.restored),
          ...problems(
            {
              400: INVALID,
              404: NO_SESSION,
              409: 'NOTHING_TO_UNREVERT, WORKSPACE_CONFLICT, SESSION_BUSY, WORKSPACE_MISSING or SESSION_READ_ONLY',
            },
            { body: true },
          ),
        },
      },
    },
    async (req) => api['session.unrevert']({ session: req.params.id, ...(req.body ?? {}) }, callerOf(req)),
  )
  app.post(
    '/sessions/:id/compact',
    {
      schema: {
        operationId: 'compactSession',
        summary: 'session.compact',
        description:
          'Requests a manual compaction (answered 200 with what was requested; it then runs as recorded events).',
        tags: ['sessions'],
        params: Id,
        response: {
          200: ok('the compaction requested, or the one already in flight', Answers.compaction),
          ...problems(
            { 400: INVALID, 404: NO_SESSION, 409: 'SESSION_ARCHIVED, SESSION_READ_ONLY or VERSION_CONFLICT' },
            { body: true },
          ),
        },
      },
    },
    async (req) => api['session.compact']({ session: req.params.id }, callerOf(req)),
  )
}
