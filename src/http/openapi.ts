import type { SwaggerTransformObject } from '@fastify/swagger'
import { createJsonSchemaTransformObject } from 'fastify-type-provider-zod'
import { z } from 'zod'

/**
 * The shapes the HTTP API answers, for route schemas and the OpenAPI
 * document (docs/API.md "GET /openapi.json"). With
 * fastify-type-provider-zod a response schema also serializes the reply, so
 * every object here is loose: a field the read model gains is sent, not
 * stripped. The read models are src/projections/fold/model.ts; what a field means
 * is documented there and in docs/EVENTS.md.
 */

/** The problem+json body every HTTP error has (src/http/problem.ts problemBody, RFC 9457). */
export const Problem = z.looseObject({
  type: z.string(),
  title: z.string(),
  status: z.number().int(),
  /** the stable code, the same on both transports (docs/API.md "Errors") */
  code: z.string(),
  detail: z.string(),
  instance: z.string().optional(),
  /** BAD_REQUEST: `issues` [{path, message}]; WORKSPACE_CONFLICT: `files` */
  details: z.record(z.string(), z.unknown()).optional(),
})

const by = z.looseObject({ id: z.string(), name: z.string() })
const rule = z.looseObject({ permission: z.string(), pattern: z.string(), action: z.enum(['allow', 'deny', 'ask']) })
const Role = z.enum(['audit', 'operate', 'admin'])
const count = z.number().int().nonnegative()

export const Session = z.looseObject({
  id: z.string(),
  title: z.string(),
  directory: z.string(),
  agent: z.string(),
  model: z.string().nullable(),
  parent: z.looseObject({ sessionId: z.string(), callId: z.string() }).nullable(),
  forkedFrom: z.looseObject({ sessionId: z.string(), seq: count }).nullable(),
  status: z.enum(['idle', 'busy', 'retrying', 'waiting']),
  run: z.looseObject({ runId: z.string(), attempt: count, cancelRequested: z.boolean() }).nullable(),
  lastRun: z.looseObject({ runId: z.string(), outcome: z.string() }).nullable(),
  retry: z.looseObject({ attempt: count, delayMs: z.number(), error: z.string() }).nullable(),
  totals: z.looseObject({
    inputTokens: count,
    outputTokens: count,
    reasoningTokens: count,
    cachedInputTokens: count,
    cost: z.number(),
  }),
  rules: z.array(rule),
  approvals: z.array(rule.extend({ ruleId: z.string() })),
  inbox: z.array(
    z.looseObject({ inputId: z.string(), seq: count, parts: z.array(z.looseObject({ type: z.string() })) }),
  ),
  pendingPermissions: z.array(
    z.looseObject({ requestId: z.string(), seq: count, permission: z.string(), patterns: z.array(z.string()) }),
  ),
  todos: z.array(z.looseObject({ content: z.string(), status: z.string(), priority: z.string() })),
  compaction: z.looseObject({ compactionId: z.string(), reason: z.string(), status: z.string() }).nullable(),
  archived: z.boolean(),
  imported: z
    .looseObject({ originalId: z.string(), importId: z.string(), events: count, digest: z.string() })
    .optional(),
  stranded: z.looseObject({ node: z.string(), host: z.string(), at: z.string() }).optional(),
  workspace: z.looseObject({ tree: z.string(), seq: count }).optional(),
  restoring: z.looseObject({}).optional(),
  revert: z
    .looseObject({
      restoreId: z.string(),
      to: count,
      from: z.string(),
      tree: z.string(),
      messages: z.array(z.string()),
    })
    .optional(),
  materializing: z.looseObject({ tree: z.string(), directory: z.string() }).optional(),
  createdAt: z.string(),
  updatedAt: z.string(),
  /** seq of the session's latest own event */
  lastSeq: count,
  /** the count of the session's own events */
  version: count,
})

export const Message = z.looseObject({
  id: z.string(),
  sessionId: z.string(),
  role: z.enum(['user', 'assistant']),
  agent: z.string(),
  model: z.string().nullable(),
  createdAt: z.string(),
  completedAt: z.string().optional(),
  finish: z.string().optional(),
  error: z.looseObject({ kind: z.string(), message: z.string() }).optional(),
})

const part = { id: z.string(), sessionId: z.string(), messageId: z.string() }
const ChangedFile = z.looseObject({
  path: z.string(),
  status: z.enum(['added', 'modified', 'deleted']),
  added: count.optional(),
  removed: count.optional(),
  binary: z.boolean().optional(),
  large: z.boolean().optional(),
})

/** A message part, by `type` (src/projections/fold/model.ts Part). */
export const Part = z.discriminatedUnion('type', [
  z.looseObject({ ...part, type: z.enum(['text', 'reasoning']), text: z.string(), ended: z.boolean() }),
  z.looseObject({ ...part, type: z.literal('file') }),
  z.looseObject({
    ...part,
    type: z.literal('tool'),
    callId: z.string(),
    tool: z.string(),
    state: z.enum(['pending', 'running', 'completed', 'error']),
    rawInput: z.string(),
  }),
  z.looseObject({ ...part, type: z.literal('step-start'), step: count, contextDigest: z.string() }),
  z.looseObject({ ...part, type: z.literal('step-finish'), finishReason: z.string(), usage: z.looseObject({}) }),
  z.looseObject({ ...part, type: z.literal('subtask'), callId: z.string(), childSessionId: z.string() }),
  z.looseObject({ ...part, type: z.literal('patch'), files: z.array(ChangedFile) }),
])

/** A stored event: the fact and the envelope the store adds (docs/EVENTS.md). */
export const Event = z.looseObject({
  seq: count,
  sessionId: z.string(),
  version: count,
  type: z.string(),
  data: z.looseObject({}),
  meta: z.looseObject({ actor: z.string(), by: by.optional() }),
  at: z.string(),
  /** a fork's event inherited from its ancestor */
  inherited: z.boolean().optional(),
})

export const Token = z.looseObject({
  tokenId: z.string(),
  name: z.string(),
  role: Role,
  sessions: z.array(z.string()).optional(),
  expiresAt: z.string().optional(),
  createdAt: z.string(),
  createdBy: z.string().optional(),
  revokedAt: z.string().optional(),
})

/** A share link's record (src/http/principals.ts ShareInfo): never its code or hash. */
export const Share = z.looseObject({
  shareId: z.string(),
  session: z.string(),
  name: z.string(),
  role: z.enum(['audit', 'operate']),
  expiresAt: z.string(),
  createdAt: z.string(),
  createdBy: z.string().optional(),
  revokedAt: z.string().optional(),
})

const WorkspaceAt = { seq: count, tree: z.string().nullable(), snapshotSeq: count.nullable() }

/** Answers of one route each, named for the protocol command they mirror (docs/API.md). */
/** A search hit (docs/SEARCH.md "Results"): where it is, who and when, and a snippet with the matches marked. */
const SearchHit = z.looseObject({
  session: z.string(),
  title: z.string(),
  seq: count,
  event: z.string(),
  firstSeq: count,
  type: z.enum(['input', 'text', 'reasoning', 'tool', 'permission', 'file', 'title']),
  key: z.string(),
  by: z.string(),
  at: z.string(),
  tool: z.string().optional(),
  snippet: z.string(),
  /** [start, end) of each match within the snippet */
  highlights: z.array(z.tuple([count, count])),
})

export const Answers = {
  search: z.looseObject({
    hits: z.array(SearchHit),
    cursor: z.string().optional(),
    /** the last seq of the log the index has read */
    indexedThrough: count,
    /** the log's head when the search was asked */
    head: count,
  }),
  health: z.looseObject({ status: z.enum(['ok', 'degraded']), version: z.string(), reason: z.string().optional() }),
  openapi: z.looseObject({ openapi: z.string(), info: z.looseObject({}), paths: z.looseObject({}) }),
  session: z.looseObject({ session: Session }),
  sessions: z.looseObject({ sessions: z.array(Session), cursor: z.string().optional() }),
  empty: z.object({}),
  accepted: z.looseObject({ inputId: z.string(), seq: count, duplicate: z.boolean() }),
  answered: z.looseObject({
    inputId: z.string(),
    seq: count,
    duplicate: z.boolean(),
    outcome: z.string().nullable(),
    error: z.looseObject({ kind: z.string(), message: z.string() }).nullable(),
    // inline, not the Message component: OpenAPI 3.0's `nullable` takes effect only beside a `type`
    message: Message.extend({}).nullable(),
    parts: z.array(Part),
    text: z.string(),
  }),
  cancelled: z.looseObject({ cancelled: z.boolean() }),
  rules: z.looseObject({ rules: z.array(rule.extend({ ruleId: z.string() })), configured: z.array(rule) }),
  state: z.looseObject({
    session: Session,
    messages: z.array(Message),
    parts: z.array(Part),
    seq: count,
    /** present when `last` cut the messages: how many the state holds */
    messageCount: count.optional(),
  }),
  context: z.looseObject({
    system: z.string(),
    messages: z.array(z.looseObject({ role: z.string() })),
    tools: z.array(z.looseObject({ name: z.string(), description: z.string() })),
    toolChoice: z.enum(['auto', 'none']),
    digest: z.string(),
    agent: z.string(),
    step: z.looseObject({ seq: count, step: count, messageId: z.string(), contextDigest: z.string() }).optional(),
  }),
  history: z.looseObject({ events: z.array(Event), next: count.optional() }),
  files: z.union([
    z.looseObject({
      ...WorkspaceAt,
      files: z.array(
        z.looseObject({ path: z.string(), size: count, type: z.enum(['file', 'symlink', 'gitlink', 'large']) }),
      ),
    }),
    z.looseObject({
      ...WorkspaceAt,
      path: z.string(),
      binary: z.boolean(),
      encoding: z.enum(['utf8', 'base64']),
      content: z.string(),
    }),
  ]),
  diff: z.looseObject({
    from: z.looseObject(WorkspaceAt),
    to: z.looseObject(WorkspaceAt),
    files: z.array(ChangedFile),
    patch: z.string(),
  }),
  restored: z.looseObject({
    restoreId: z.string(),
    kind: z.enum(['revert', 'unrevert']),
    tree: z.string(),
    changed: z.array(ChangedFile),
    messages: z.array(z.string()),
  }),
  compaction: z.looseObject({ compactionId: z.string(), seq: count, duplicate: z.boolean() }),
  tokenCreated: Token.extend({ token: z.string() }),
  tokens: z.looseObject({ tokens: z.array(Token) }),
  token: Token,
  whoami: z.looseObject({
    id: z.string(),
    name: z.string(),
    role: Role,
    sessions: z.array(z.string()).optional(),
    /** a share link's visitor: the shared session, who shared it, until when */
    share: z.looseObject({ session: z.string(), by: z.string().optional(), expiresAt: z.string() }).optional(),
  }),
  shareCreated: Share.extend({ code: z.string(), path: z.string(), url: z.string() }),
  shares: z.looseObject({ shares: z.array(Share) }),
  share: Share,
  backup: z.looseObject({
    directory: z.string(),
    seq: count,
    digest: z.string(),
    events: count,
    objects: count,
    bytes: count,
    ms: count,
    copyMs: count,
    checkMs: count,
    objectsMs: count,
  }),
  mcpServers: z.looseObject({
    seq: count,
    servers: z.array(
      z.looseObject({
        name: z.string(),
        state: z.enum(['connecting', 'ready', 'failed', 'auth_required', 'disconnected']),
        attempt: count,
        since: count,
        at: z.string(),
        transport: z.enum(['stdio', 'streamable-http', 'sse']).optional(),
        tools: z.array(z.string()),
        toolCount: count.optional(),
        toolsDigest: z.string().optional(),
        instructionsDigest: z.string().optional(),
        error: z.string().optional(),
        retryInMs: count.optional(),
        /** now, to admins: the URL a browser opens to sign the server in (it waits for one) */
        authorizationUrl: z.string().optional(),
      }),
    ),
  }),
  /** the code is the URL's fragment */
  loginLink: z.looseObject({ url: z.string(), expiresAt: z.string() }),
} as const

/** The schemas the document names as components (#/components/schemas/<id>) instead of repeating them inline. */
export function componentRegistry() {
  const registry = z.registry<{ id: string }>()
  registry.add(Problem, { id: 'Problem' })
  registry.add(Session, { id: 'Session' })
  registry.add(Message, { id: 'Message' })
  registry.add(Part, { id: 'Part' })
  registry.add(Event, { id: 'Event' })
  registry.add(Token, { id: 'Token' })
  registry.add(Share, { id: 'Share' })
  return registry
}

/**
 * The document as served: with its components — the registry's schemas the
 * paths refer to, directly or through another component (the transform also
 * emits an unused `<id>Input` copy of each) —, a body whose schema is
 * nullable marked optional (@fastify/swagger marks every body required; the
 * app reads an absent body as null: app.ts), and a 204 without content.
 */
export function finishDocument(registry: ReturnType<typeof componentRegistry>): SwaggerTransformObject {
  const transform = createJsonSchemaTransformObject({ schemaRegistry: registry })
  return (input) => {
    const document = transform(input)
    if (!('components' in document) || !document.components?.schemas) return document
    for (const item of Object.values(document.paths ?? {}))
      for (const method of ['post', 'put', 'patch', 'delete'] as const) {
        const body = item?.[method]?.requestBody
        const schema = body && 'content' in body ? body.content['application/json']?.schema : undefined
        if (body && 'required' in body && schema && 'nullable' in schema && schema.nullable) body.required = false
        const empty = item?.[method]?.responses?.['204']
        if (empty && 'content' in empty) delete empty.content
      }
    const schemas = document.components.schemas
    const used = new Set<string>()
    const visit = (value: unknown) => {
      for (const [, id] of JSON.stringify(value ?? null).matchAll(/"#\/components\/schemas\/([^"]+)"/g)) {
        if (id === undefined || used.has(id)) continue
        used.add(id)
        visit(schemas[id])
      }
    }
    visit(document.paths)
    for (const id of Object.keys(schemas)) if (!used.has(id)) delete schemas[id]
    return document
  }
}

/**
 * A documented response: its description and, by content type, its schema.
 * The reply's type is left open (`z.ZodType`): a route answers what its
 * command returns, `unknown` (src/http/api.ts), and the schema checks that
 * reply as it serializes it — a reply that does not match is a 500.
 */
export interface Described {
  readonly description: string
  readonly content: Record<string, { readonly schema: z.ZodType }>
}

/** A success response: JSON, described. */
export function ok(description: string, schema: z.ZodType): Described {
  return { description, content: { 'application/json': { schema } } }
}

/** A 204: no body (finishDocument leaves the document's response without content). */
export function noContent(description: string): Described {
  return { description, content: { 'application/json': { schema: z.null() } } }
}

/** An error response: problem+json, its description naming the codes the route answers with it. */
export function problem(description: string): Described {
  return { description, content: { 'application/problem+json': { schema: Problem } } }
}

export type ProblemStatus = 400 | 403 | 404 | 409 | 410 | 413 | 415 | 422 | 500 | 503

/** What every route with the token may answer: the token, Host and Origin checks, role and session limits, a bug. */
const EVERY_ROUTE = {
  401: 'UNAUTHORIZED: no token, or a wrong, revoked or expired one',
  403: 'FORBIDDEN: a foreign Origin or Host, or a token whose role or sessions do not allow the call',
  500: 'INTERNAL: a bug (logged, never detailed)',
}
/** What a POST or DELETE may answer: fastify reads its body, if any, whatever the route's schema. */
const WITH_BODY = {
  413: 'PAYLOAD_TOO_LARGE: the body is over limits.bodyBytes',
  415: 'BAD_REQUEST: a body that is not application/json',
}

/**
 * The problem responses of a route: those every route answers (and, with
 * `body`, those of a POST or DELETE), with what the route names added to
 * their descriptions, plus the statuses only it answers. 400 is for a route
 * to name: any that validates a path, query or body.
 */
export function problems(named: Partial<Record<ProblemStatus, string>>, options: { body?: boolean } = {}) {
  const described: Record<string, string> = { ...EVERY_ROUTE, ...(options.body && WITH_BODY) }
  for (const [status, text] of Object.entries(named)) {
    const common = described[status]
    described[status] = common === undefined ? text : `${common}; ${text}`
  }
  return Object.fromEntries(Object.entries(described).map(([status, text]) => [status, problem(text)]))
}
