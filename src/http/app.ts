import { setMaxListeners } from 'node:events'
import cors from '@fastify/cors'
import swagger from '@fastify/swagger'
import websocket from '@fastify/websocket'
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type RawReplyDefaultExpression,
  type RawRequestDefaultExpression,
  type RawServerDefault,
} from 'fastify'
import { createJsonSchemaTransform, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod'
import { ChronicleError } from '../events/errors.js'
import { createApi } from './api.js'
import { RequestLogController } from './logger.js'
import { endRequestSpan, tracedRequestLogger } from './request-spans.js'
import { guarded } from './authorize.js'
import { credentialOf, principalOf, setAuthenticated } from './caller.js'
import { Principals } from './principals.js'
import { tokenRoutes } from './routes/tokens.js'
import { shareRoutes } from './routes/shares.js'
import { adminRoutes } from './routes/admin.js'
import { SessionFanout } from './ws/fanout.js'
import type { AppDeps } from './deps.js'
import { componentRegistry, finishDocument } from './openapi.js'
import { problemBody, toProblem } from './problem.js'
import { inputRoutes } from './routes/inputs.js'
import { elicitationRoutes } from './routes/elicitations.js'
import { loginRoutes } from './routes/login.js'
import { mcpRoutes } from './routes/mcp.js'
import { mcpOAuthRoutes } from './routes/mcp-oauth.js'
import { metaRoutes } from './routes/meta.js'
import { pageRoutes } from './routes/page.js'
import { sessionRoutes } from './routes/sessions.js'
import { searchRoutes } from './routes/search.js'
import { checkRequest, corsOptions, redactUrl, SECURITY_HEADERS, selectProtocol } from './security.js'
import { Connection, REVOKED_CLOSE_CODE } from './ws/connection.js'
import { metricsRoutes } from './routes/metrics.js'
import { clusterRoutes } from './routes/cluster.js'

export type App = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  ZodTypeProvider
>

export interface RouteInfo {
  readonly method: string
  readonly url: string
}
const registered = new WeakMap<object, RouteInfo[]>()

/** Every route the app serves (the security test walks this list so no route can skip auth). */
export function routesOf(app: App): readonly RouteInfo[] {
  return registered.get(app) ?? []
}

/**
 * The HTTP + WebSocket application, without listening: tests drive it with
 * inject/injectWS or listen on port 0; src/main.ts composes the real one.
 */
export async function buildApp(deps: AppDeps): Promise<App> {
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    bodyLimit: deps.limits.bodyBytes,
    // Time to receive a whole request (slowloris); a ?wait=true response may then take as long as the run.
    requestTimeout: 30_000,
    routerOptions: { maxParamLength: 300 },
    // supervisors probe /health every few seconds: its requests are logged at debug (the rest at info)
    logController: new RequestLogController(),
    ...(deps.tracing && { childLoggerFactory: tracedRequestLogger(deps.tracing) }),
  }).withTypeProvider<ZodTypeProvider>()
  if (deps.tracing) {
    app.addHook('onResponse', async (req, reply) => endRequestSpan(req, reply))
    app.addHook('onRequestAbort', async (req) => endRequestSpan(req))
  }
  const routes: RouteInfo[] = []
  registered.set(app, routes)
  app.addHook('onRoute', (r) => {
    for (const method of [r.method].flat()) if (method !== 'HEAD') routes.push({ method, url: r.url })
  })
  app.setValidatorCompiler(validatorCompiler)
  // Replies are written as they are: the response schemas describe them (/openapi.json, checked against real
  // replies by test/http/openapi.test.ts) but do not filter or re-validate them on every request.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data))
  // JSON only: text/plain is a preflight-free "simple" request a foreign page could send.
  app.removeContentTypeParser('text/plain')
  // An empty JSON body is no body (fetch(url, {method: 'POST', headers}) sends one): the route's schema decides.
  const json = app.getDefaultJsonParser('error', 'error')
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) =>
    body === '' ? done(null, undefined) : json(req, String(body), done),
  )

  // Every response, refusals and the web page's files included, carries the security headers (security.ts).
  app.addHook('onSend', async (_req, reply, payload) => {
    void reply.headers(SECURITY_HEADERS)
    return payload
  })
  app.setErrorHandler((err, req, reply) => {
    const problem = toProblem(err)
    if (problem.internal) req.log.error({ err }, 'request failed')
    if (problem.status === 401) void reply.header('www-authenticate', 'Bearer realm="chronicle"')
    void reply
      .status(problem.status)
      .type('application/problem+json')
      .send(problemBody(problem, redactUrl(req.url)))
  })
  app.setNotFoundHandler((req) => {
    throw new ChronicleError('NOT_FOUND', `no route ${req.method} ${redactUrl(req.url).split('?')[0]}`)
  })

  // Problem, Session, Message… are components the routes' schemas refer to (src/http/openapi.ts).
  const components = componentRegistry()
  await app.register(swagger, {
    openapi: {
      info: { title: 'Chronicle', version: deps.version, description: 'See docs/API.md for the WebSocket protocol.' },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
    },
    transform: createJsonSchemaTransform({ schemaRegistry: components }),
    transformObject: finishDocument(components),
  })

  const connections = new Set<Connection>()
  await app.register(websocket, {
    options: { maxPayload: deps.limits.frameBytes, handleProtocols: selectProtocol },
    preClose(done) {
      for (const c of connections) c.close('shutdown', 1001)
      // Not waiting for the clients: each socket is cut after a short grace if its peer does not answer the close.
      this.websocketServer.close()
      done()
    },
  })

  const principals = deps.principals ?? (await Principals.open(deps.ports, deps.ids, deps.security.token))
  const web = deps.web
  const policy = {
    ...deps.security,
    authenticate: (presented: string) => principals.authenticate(presented),
    // a web session speaks for its principal while that principal's token is active (docs/SECURITY.md "The web page")
    ...(web && {
      webSession: (secret: string) => {
        const session = web.sessions.find(secret)
        const principal = session && principals.byId(session.principal)
        return session && principal && { principal, session: session.id }
      },
    }),
  }
  // CORS for the configured origins only (none: no CORS at all). Its onRequest hook runs before the one below:
  // it answers an allowed origin's preflight (204, no token: a browser sends none) and names that origin on
  // every other response to it, refusals included, so a page can read them (security.ts corsOptions).
  if (deps.security.allowedOrigins.length > 0) await app.register(cors, corsOptions(policy))

  // Before routing, body parsing and the WebSocket upgrade. Added after the websocket plugin so its own
  // onRequest hook has marked upgrade requests: a refused upgrade's socket is then destroyed, not left open.
  app.addHook('onRequest', async (req) => {
    try {
      const authenticated = checkRequest(req, policy)
      if (authenticated) setAuthenticated(req, authenticated)
    } catch (err) {
      // Refusals are logged (never the token): an exposed server should not be probed unseen.
      req.log.warn(
        {
          url: redactUrl(req.url),
          origin: req.headers.origin,
          host: req.headers.host,
          code: (err as ChronicleError).code,
        },
        'request refused',
      )
      throw err
    }
  })

  // Requests waiting for a run (?wait=true) must not hold a shutdown open: they are answered 202 when it begins.
  const closing = new AbortController()
  setMaxListeners(0, closing.signal) // one listener per waiting request, removed when it is answered
  app.addHook('preClose', (done) => {
    closing.abort()
    done()
  })

  const withPrincipals = { ...deps, principals }
  const api = guarded(createApi(withPrincipals), deps.ports.readModels)
  const fanout = await SessionFanout.open(deps.ports.log)
  /** the web session each socket opened with the cookie came from: a logout closes them */
  const webSockets = new WeakMap<Connection, string>()
  app.get('/ws', { websocket: true, schema: { hide: true } }, (socket, req) => {
    if (connections.size >= deps.limits.maxConnections) {
      socket.close(1013, 'too many connections')
      return
    }
    const connection = new Connection(socket, withPrincipals, api, fanout, principalOf(req))
    connections.add(connection)
    const credential = credentialOf(req)
    if (credential.via === 'cookie') webSockets.set(connection, credential.session)
    socket.on('close', () => connections.delete(connection))
  })
  // a revoked token or share stops at once: its open sockets are closed, its web sessions ended (docs/API.md "Closing codes")
  const stopRevoking = principals.onRevoked((tokenId) => {
    for (const c of connections) if (c.principal.id === tokenId) c.close('revoked', REVOKED_CLOSE_CODE)
    web?.sessions.endFor(tokenId)
  })
  app.addHook('onClose', (_app, done) => {
    stopRevoking()
    fanout.close()
    if (!deps.principals) principals.close()
    done()
  })

  metaRoutes(app, deps)
  if (deps.metrics) {
    deps.metrics.sockets(() => {
      const head = fanout.head
      return { connections: connections.size, lags: [...connections].flatMap((c) => c.lags(head)) }
    })
    metricsRoutes(app, deps.metrics)
  }
  if (web) {
    pageRoutes(app, web.root)
    loginRoutes(app, {
      web,
      principals,
      onLogout: (session) => {
        for (const c of connections) if (webSockets.get(c) === session) c.close('revoked', REVOKED_CLOSE_CODE)
      },
    })
  }
  sessionRoutes(app, api)
  tokenRoutes(app, api)
  shareRoutes(app, api)
  adminRoutes(app, api)
  clusterRoutes(app, deps.cluster)
  mcpRoutes(app, api)
  inputRoutes(app, api, deps, closing.signal)
  elicitationRoutes(app, api)
  searchRoutes(app, api)
  if (deps.mcpSignIn) mcpOAuthRoutes(app, deps.mcpSignIn)
  return app
}
