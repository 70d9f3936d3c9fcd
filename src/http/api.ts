import { z } from 'zod'
import { InputPart, Role, ShareRole } from '../events/catalogue.js'
import type { EventMeta } from '../events/envelope.js'
import { ChronicleError } from '../events/errors.js'
import { requestCompaction } from '../commands/compact.js'
import { checkDirectory, checkNotInDataDir } from '../commands/directory.js'
import { execute } from '../commands/execute.js'
import { fork } from '../commands/fork.js'
import { submitInput } from '../commands/input.js'
import { permissionCommand } from '../commands/permission.js'
import { elicitationCommand } from '../commands/elicitation.js'
import { checkElicitationContent } from '../tools/mcp/elicitation-check.js'
import { cancelRun } from '../commands/run.js'
import { decideSession } from '../commands/session.js'
import { exportLinesOf } from '../projections/transfer/export.js'
import type { Session } from '../projections/fold/model.js'
import { atifThrough } from '../projections/transfer/atif.js'
import { mcpServersAt } from '../projections/queries/mcp-servers.js'
import { MAX_LIMIT } from '../projections/search/port.js'
import { MAX_QUERY_CHARS, parseQuery } from '../projections/search/query.js'
import type { AppDeps } from './deps.js'
import type { Principal } from './principals.js'
import { reaches } from './authorize.js'

/**
 * The protocol's commands (docs/API.md), defined once: a zod schema for the
 * params and a handler. The WebSocket dispatches on `method`; each HTTP route
 * maps its path, query and body onto the same params and calls the same
 * handler, so both transports behave identically. A handler that writes
 * calls a command (src/commands/) and, where a run may follow, wakes the
 * runtime.
 */

const sessionId = z.string().min(1).max(200)
const seq = z.coerce.number().int().nonnegative()

export const Params = {
  'session.create': z.object({
    directory: z.string().min(1).optional(),
    agent: z.string().min(1).optional(),
    model: z.string().min(1).optional(),
    title: z.string().min(1).max(500).optional(),
  }),
  'session.list': z.object({
    cursor: z.string().optional(),
    limit: z.coerce.number().int().min(1).max(500).optional(),
    archived: z.union([z.boolean(), z.enum(['true', 'false']).transform((v) => v === 'true')]).optional(),
  }),
  'session.get': z.object({ session: sessionId }),
  'session.archive': z.object({ session: sessionId }),
  /** renames, archives or unarchives (docs/API.md "Sessions"): what is given changes, in one transaction */
  'session.update': z.object({
    session: sessionId,
    title: z.string().trim().min(1).max(500).optional(),
    archived: z.boolean().optional(),
  }),
  'input.submit': z.object({
    session: sessionId,
    inputId: z.string().min(1).max(200).optional(),
    parts: z.array(InputPart).min(1).max(100),
    agent: z.string().min(1).optional(),
    model: z.string().min(1).optional(),
    delivery: z.enum(['steer', 'queue']).optional(),
    noReply: z.boolean().optional(),
  }),
  'run.cancel': z.object({ session: sessionId }),
  'permission.reply': z.object({
    session: sessionId,
    requestId: z.string().min(1),
    reply: z.enum(['once', 'always', 'reject']),
    message: z.string().max(10_000).optional(),
  }),
  'permission.rules': z.object({ session: sessionId }),
  'permission.revoke': z.object({ session: sessionId, ruleId: z.string().min(1) }),
  /** answers an MCP server's elicitation (docs/TOOLS.md "Elicitation"): content only with accept */
  'elicitation.answer': z.object({
    session: sessionId,
    elicitationId: z.string().min(1).max(200),
    action: z.enum(['accept', 'decline', 'cancel']),
    content: z.record(z.string().max(200), z.unknown()).optional(),
  }),
  'session.fork': z.object({
    session: sessionId,
    at: z.number().int().positive(),
    title: z.string().min(1).max(500).optional(),
    /**
     * where the child works: with its files, a directory to write them into (absent or empty; default
     * `<dataDir>/forks/<id>`); without, an existing one. Required to fork imported history.
     */
    directory: z.string().min(1).max(4096).optional(),
    /** false: fork the history only, the child working in the parent's directory (or the one named) */
    files: z.boolean().optional(),
  }),
  /** with `last`: only the latest `last` messages and their parts (`messageCount` says how many there are) */
  'session.state': z.object({
    session: sessionId,
    at: seq.optional(),
    last: z.coerce.number().int().min(1).max(1_000_000).optional(),
  }),
  'session.context': z.object({ session: sessionId, at: seq.optional() }),
  'session.history': z.object({
    session: sessionId,
    after: seq.optional(),
    before: seq.optional(),
    limit: z.coerce.number().int().min(1).max(5000).optional(),
  }),
  'session.compact': z.object({ session: sessionId }),
  /**
   * the session's history as `chronicle export` writes it (`jsonl`, the default: format 2, hashes and blobs;
   * `chronicle import` takes it), or as an ATIF trajectory (`atif`: docs/API.md "ATIF export")
   */
  'session.export': z.object({ session: sessionId, format: z.enum(['jsonl', 'atif']).optional() }),
  /** the workspace's files at a seq (default: now), or one file's content with `path` */
  'session.files': z.object({ session: sessionId, at: seq.optional(), path: z.string().min(1).max(4096).optional() }),
  /** the unified diff of the workspace between two seqs */
  'session.diff': z.object({ session: sessionId, from: seq, to: seq }),
  /** the session directory back to the workspace at a seq; later messages hidden from the model */
  'session.revert': z.object({ session: sessionId, to: z.number().int().positive(), force: z.boolean().optional() }),
  /** undoes the latest revert, until a new input makes it final */
  'session.unrevert': z.object({ session: sessionId, force: z.boolean().optional() }),
  /** admin: a named token with a role (docs/SECURITY.md "Principals and tokens"); its secret is answered once */
  'token.create': z.object({
    name: z.string().min(1).max(100),
    role: Role,
    sessions: z.array(sessionId).min(1).max(1000).optional(),
    /** an ISO time, or a duration from now: `30d`, `12h`, `45m` */
    expires: z.string().min(1).max(40).optional(),
  }),
  'token.list': z.object({}),
  'token.revoke': z.object({ tokenId: z.string().min(1).max(200) }),
  /**
   * a share link to a session (docs/SECURITY.md "Shares"): `audit` (default) reads, `operate` also acts;
   * the link's code is answered once
   */
  'share.create': z.object({
    session: sessionId,
    role: ShareRole.optional(),
    /** a duration from now (`7d`, `12h`, `45m`: the default 7d) or an ISO time */
    expires: z.string().min(1).max(40).optional(),
    /** what the visitors' events are attributed to; default `share of <session>` */
    name: z.string().min(1).max(100).optional(),
  }),
  /** the shares of the sessions the caller reaches (of one, with `session`) */
  'share.list': z.object({ session: sessionId.optional() }),
  'share.revoke': z.object({ shareId: z.string().min(1).max(200) }),
  /** the principal the presented token speaks for */
  whoami: z.object({}),
  /**
   * full-text search over every session the caller reaches (docs/SEARCH.md): `q` in the query language,
   * newest first or by relevance, in pages; archived sessions only with `archived`
   */
  search: z.object({
    q: z.string().max(MAX_QUERY_CHARS),
    limit: z.coerce.number().int().min(1).max(MAX_LIMIT).optional(),
    cursor: z.string().max(200).optional(),
    archived: z.union([z.boolean(), z.enum(['true', 'false']).transform((v) => v === 'true')]).optional(),
    order: z.enum(['newest', 'relevance']).optional(),
  }),
  /** which MCP servers and tools existed right after event `at` (default: now): docs/TOOLS.md "Server state in the log" */
  'mcp.servers': z.object({ at: seq.optional() }),
  /**
   * admin: a consistent copy of the store and the workspace objects into a new directory on the server's machine
   * (docs/BACKUP.md); answers its seq and head digest
   */
  'store.backup': z.object({
    out: z
      .string()
      .min(2)
      .max(4096)
      .refine((path) => path.startsWith('/'), 'out must be an absolute path'),
  }),
} as const

export type Method = keyof typeof Params
export type ParamsOf<M extends Method> = z.output<(typeof Params)[M]>
type Handler<M extends Method> = (params: ParamsOf<M>, caller: Caller) => Promise<unknown> | unknown

/** Who calls, over which connection, with which command id: what authorization checks and the log records. */
export interface Caller {
  readonly principal: Principal
  readonly connection?: string
  readonly commandId?: string
  /** the traceparent of the call's span, when traces are on: recorded in the meta of what it causes */
  readonly trace?: string
}

/** The meta of an event a caller causes (docs/EVENTS.md "The envelope"). */
export function metaOf(caller: Caller, extra: Partial<EventMeta> = {}): EventMeta {
  return {
    actor: 'user',
    by: { id: caller.principal.id, name: caller.principal.name },
    ...(caller.connection !== undefined && { connection: caller.connection }),
    ...(caller.commandId !== undefined && { commandId: caller.commandId }),
    ...(caller.trace !== undefined && { trace: caller.trace }),
    ...extra,
  }
}

/** `30d`, `12h`, `45m` from now, or an ISO time. */
function expiryOf(expires: string, now = Date.now()): string {
  const m = /^(\d+)([dhm])$/.exec(expires)
  if (m)
    return new Date(
      now + Number(m[1]) * { d: 86_400_000, h: 3_600_000, m: 60_000 }[m[2] as 'd' | 'h' | 'm'],
    ).toISOString()
  const at = Date.parse(expires)
  if (Number.isNaN(at))
    throw new ChronicleError('BAD_REQUEST', `expires must be a duration (30d, 12h, 45m) or an ISO time: ${expires}`)
  return new Date(at).toISOString()
}
export type Api = { [M in Method]: Handler<M> }

/**
 * A state cut to its latest `last` messages and their parts: a page showing
 * the end of a long session need not receive (and parse) all of it.
 */
function latest<S extends { messages: readonly { id: string }[]; parts: readonly { messageId: string }[] }>(
  state: S,
  last: number | undefined,
): S | (S & { messageCount: number }) {
  if (last === undefined || state.messages.length <= last) return state
  const messages = state.messages.slice(-last)
  const kept = new Set(messages.map((m) => m.id))
  return {
    ...state,
    messages,
    parts: state.parts.filter((part) => kept.has(part.messageId)),
    messageCount: state.messages.length,
  }
}

export const METHODS = Object.keys(Params) as Method[]

export function isMethod(name: string): name is Method {
  return Object.hasOwn(Params, name)
}

export function createApi(deps: AppDeps): Api {
  const { ports } = deps
  const missing = (what: string): never => {
    throw new ChronicleError('NOT_IMPLEMENTED', `${what} is not available in this server build`)
  }
  const runtime = () => deps.runtime ?? missing('the agent runtime')
  /** The session (SESSION_NOT_FOUND), with every append made to it before (read-your-writes). */
  const session = async (id: string): Promise<Session> => {
    const found = await ports.readModels.session(id)
    if (!found) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${id}`)
    return found
  }

  return {
    async 'session.create'(p, caller) {
      const directory = p.directory ?? deps.defaults.directory
      checkDirectory(directory)
      if (p.directory) checkNotInDataDir(p.directory, deps.dataDir)
      const agent = p.agent ?? deps.defaults.agent
      if (deps.agents && !deps.agents.has(agent)) throw new ChronicleError('UNKNOWN_AGENT', `no agent named ${agent}`)
      const id = deps.ids.next('ses')
      await execute(
        ports,
        id,
        (s) =>
          decideSession(
            {
              type: 'create',
              directory,
              agent,
              model: p.model ?? deps.defaults.model,
              ...(p.title && { title: p.title }),
            },
            s,
            id,
          ),
        { meta: metaOf(caller), durability: 'full' },
      )
      return { session: await session(id) }
    },
    'session.list'(p) {
      return ports.readModels.list(p)
    },
    async 'session.get'(p) {
      return { session: await session(p.session) }
    },
    async 'session.archive'(p, caller) {
      await execute(ports, p.session, (s) => decideSession({ type: 'archive' }, s, p.session), {
        meta: metaOf(caller),
        durability: 'full',
        anyNode: true,
      })
      return {}
    },
    async 'session.update'(p, caller) {
      const { title, archived } = p
      await session(p.session)
      await execute(
        ports,
        p.session,
        (s) => [
          ...(title !== undefined && s?.title !== title ? decideSession({ type: 'rename', title }, s, p.session) : []),
          ...(archived !== undefined ? decideSession({ type: archived ? 'archive' : 'unarchive' }, s, p.session) : []),
        ],
        { meta: metaOf(caller), durability: 'full', anyNode: true },
      )
      return { session: await session(p.session) }
    },
    async 'input.submit'(p, caller) {
      const { session: id, ...input } = p
      const wake = runtime().wake
      const { actor: _, ...who } = metaOf(caller)
      const accepted = await submitInput(ports, id, input, deps.submit ?? missing('the agent runtime'), 'user', who)
      if (!input.noReply && !accepted.duplicate) wake(id)
      return accepted
    },
    'run.cancel'(p, caller) {
      return cancelRun(ports, p.session, metaOf(caller)) // the runtime aborts the run when it sees the request committed
    },
    async 'permission.reply'(p, caller) {
      const { requestId, reply, message } = p
      await permissionCommand(
        ports,
        deps.ids,
        p.session,
        { type: 'reply', requestId, reply, ...(message !== undefined && { message }) },
        metaOf(caller, { request: requestId }),
      )
      return {}
    },
    async 'elicitation.answer'(p, caller) {
      const { elicitationId, action, content } = p
      await elicitationCommand(
        ports,
        p.session,
        { type: 'answer', elicitationId, action, ...(content !== undefined && { content }) },
        metaOf(caller, { request: elicitationId }),
        checkElicitationContent,
      )
      return {}
    },
    async 'permission.rules'(p) {
      const s = await session(p.session)
      return { rules: s.approvals, configured: s.rules }
    },
    async 'permission.revoke'(p, caller) {
      await permissionCommand(ports, deps.ids, p.session, { type: 'revoke', ruleId: p.ruleId }, metaOf(caller))
      return {}
    },
    async 'session.fork'(p, caller) {
      await session(p.session)
      if (p.directory) checkNotInDataDir(p.directory, deps.dataDir)
      const options = {
        meta: metaOf(caller, { command: 'fork' }),
        ...(p.title && { title: p.title }),
        ...(p.directory && { directory: p.directory }),
        ...(p.files !== undefined && { files: p.files }),
      }
      // with files when the server records workspaces; else the fork command itself (history only)
      if (deps.forks) return { session: await deps.forks.fork(p.session, p.at, options) }
      return { session: await fork(ports, deps.ids, p.session, p.at, options) }
    },
    async 'session.state'(p) {
      const s = await session(p.session)
      if (p.at === undefined || !deps.timeTravel) {
        if (p.at !== undefined) missing('time travel')
        return latest(
          {
            session: s,
            messages: await ports.readModels.messages(p.session),
            parts: await ports.readModels.parts(p.session),
            seq: s.lastSeq,
          },
          p.last,
        )
      }
      return latest(await deps.timeTravel.stateAt(p.session, p.at), p.last)
    },
    async 'session.context'(p) {
      await session(p.session)
      const context = deps.context ?? missing('the model context compiler')
      return context(p.session, p.at)
    },
    async 'session.files'(p) {
      await session(p.session)
      const workspace = deps.workspace ?? missing('workspace history')
      return p.path === undefined ? workspace.files(p.session, p.at) : workspace.file(p.session, p.path, p.at)
    },
    async 'session.diff'(p) {
      await session(p.session)
      const workspace = deps.workspace ?? missing('workspace history')
      return workspace.diff(p.session, p.from, p.to)
    },
    async 'session.revert'(p, caller) {
      await session(p.session)
      const restorer = deps.restorer ?? missing('workspace revert')
      const { actor: _, ...by } = metaOf(caller)
      return restorer.revert(p.session, p.to, { ...(p.force && { force: true }), by })
    },
    async 'session.unrevert'(p, caller) {
      await session(p.session)
      const restorer = deps.restorer ?? missing('workspace revert')
      const { actor: _, ...by } = metaOf(caller)
      return restorer.unrevert(p.session, { ...(p.force && { force: true }), by })
    },
    async 'session.history'(p) {
      await session(p.session)
      const timeTravel = deps.timeTravel ?? missing('history')
      return timeTravel.history(p.session, p)
    },
    async 'session.export'(p) {
      await session(p.session)
      if (p.format === 'atif') return { atif: await atifThrough(ports.readModels, p.session, deps.version) }
      let jsonl = ''
      for await (const line of exportLinesOf(ports.log, p.session)) jsonl += `${line}\n`
      return { jsonl }
    },
    async 'session.compact'(p, caller) {
      const wake = runtime().wake
      const { actor: _, ...by } = metaOf(caller)
      const requested = await requestCompaction(ports, deps.ids, p.session, by)
      wake(p.session) // an idle session compacts now; a running one at its next step
      return requested
    },
    async 'token.create'(p, caller) {
      const principals = deps.principals ?? missing('tokens')
      const { token, info } = await principals.create(
        {
          name: p.name,
          role: p.role,
          ...(p.sessions && { sessions: p.sessions }),
          ...(p.expires !== undefined && { expiresAt: expiryOf(p.expires) }),
        },
        metaOf(caller, { command: 'token.create' }),
      )
      return { token, ...info }
    },
    'token.list'() {
      return { tokens: (deps.principals ?? missing('tokens')).list() }
    },
    'token.revoke'(p, caller) {
      return (deps.principals ?? missing('tokens')).revoke(p.tokenId, metaOf(caller, { command: 'token.revoke' }))
    },
    async 'share.create'(p, caller) {
      const principals = deps.principals ?? missing('shares')
      const { code, info } = await principals.createShare(
        {
          session: p.session,
          role: p.role ?? 'audit',
          name: p.name ?? `share of ${p.session}`,
          expiresAt: expiryOf(p.expires ?? '7d'),
        },
        metaOf(caller, { command: 'share.create' }),
      )
      return { ...info, code, path: `/login#${code}` }
    },
    async 'share.list'(p, caller) {
      const shares = (deps.principals ?? missing('shares')).listShares(p.session)
      const reached = await Promise.all(shares.map((s) => reaches(ports.readModels, caller.principal, s.session)))
      return { shares: shares.filter((_, i) => reached[i]) }
    },
    async 'share.revoke'(p, caller) {
      const principals = deps.principals ?? missing('shares')
      // the share's session must be one the caller reaches: a limited operator revokes only its sessions' shares
      if (!(await reaches(ports.readModels, caller.principal, principals.share(p.shareId).session)))
        throw new ChronicleError('FORBIDDEN', `${caller.principal.name} does not reach the session of ${p.shareId}`)
      return principals.revokeShare(p.shareId, metaOf(caller, { command: 'share.revoke' }))
    },
    'store.backup'(p) {
      return (deps.backups ?? missing('backups')).take(p.out)
    },
    async 'mcp.servers'(p, caller) {
      const answer = await mcpServersAt(ports.log, p.at)
      const waiting = p.at === undefined && caller.principal.role === 'admin' ? deps.mcpSignIns?.() : undefined
      if (!waiting?.size) return answer
      return {
        ...answer,
        servers: answer.servers.map((s) => {
          const authorizationUrl = waiting.get(s.name)
          return authorizationUrl ? { ...s, authorizationUrl } : s
        }),
      }
    },
    search(p, caller) {
      const search = deps.search ?? missing('search')
      const { sessions } = caller.principal
      return search.search(parseQuery(p.q), {
        // a limited token finds only in the sessions it reaches: those, their forks and sub-agents
        ...(sessions && { scope: sessions }),
        ...(p.archived !== undefined && { archived: p.archived }),
        ...(p.limit !== undefined && { limit: p.limit }),
        ...(p.cursor !== undefined && { cursor: p.cursor }),
        ...(p.order && { order: p.order }),
      })
    },
    whoami(_p, caller) {
      const { id, name, role, sessions, share } = caller.principal
      return { id, name, role, ...(sessions && { sessions }), ...(share && { share }) }
    },
  }
}

/** Validates params for a method (the WebSocket path; HTTP validates through route schemas). */
export function parseParams<M extends Method>(method: M, params: unknown): ParamsOf<M> {
  return Params[method].parse(params ?? {}) as ParamsOf<M>
}
