import type { FastifyRequest } from 'fastify'
import { z } from 'zod'
import { ChronicleError } from '../../events/errors.js'
import type { App } from '../app.js'
import { credentialOf, principalOf } from '../caller.js'
import type { WebDeps } from '../deps.js'
import { loginUrl } from '../login-codes.js'
import { Answers, noContent, ok, problem, problems } from '../openapi.js'
import type { Principals } from '../principals.js'
import { SESSION_COOKIE, sessionCookie } from '../security.js'

/**
 * The web page's login (docs/API.md "Web page"): a one-time link's code is
 * traded for the session cookie (`POST /login`, no credential needed), the
 * cookie given back (`POST /logout`), and a token holder mints a link for
 * itself (`POST /login-links`). Nothing here is a protocol method: a cookie
 * is an HTTP matter, and a login appends nothing to the log.
 */

/** failed logins per client address within a minute; more are answered RATE_LIMITED (256-bit codes cannot be guessed anyway) */
const MAX_FAILURES = 20
const WINDOW_MS = 60_000

export interface LoginRouteDeps {
  readonly web: WebDeps
  readonly principals: Principals
  /** a web session ended by logout: its open sockets are closed */
  readonly onLogout: (session: string) => void
}

export function loginRoutes(app: App, { web, principals, onLogout }: LoginRouteDeps): void {
  const failures = new FailureWindow()
  const principalById = (id: string | undefined) => (id === undefined ? undefined : principals.byId(id))
  app.post(
    '/login',
    {
      schema: {
        operationId: 'login',
        summary: 'trade a login code for the session cookie (no token needed)',
        description:
          'The code is the fragment of a login link (`/login#<code>`): single use, valid 10 minutes; or a share link’s (`<shareId>.<secret>`), valid for any number of visitors until the share expires or is revoked. Sets `chronicle_session` (HttpOnly, SameSite=Strict, 30 days; a share’s ends with the share).',
        tags: ['web'],
        security: [],
        body: z.object({ code: z.string().min(1).max(200) }),
        response: {
          204: noContent('logged in: Set-Cookie chronicle_session'),
          400: problem('BAD_REQUEST: the body does not match its schema, or is not JSON'),
          401: problem('LOGIN_INVALID: a wrong, used or expired code, or one whose token was revoked since'),
          410: problem('SHARE_REVOKED, SHARE_EXPIRED: a share link whose share was revoked or has expired'),
          403: problem('FORBIDDEN: a foreign Origin or Host'),
          413: problem('PAYLOAD_TOO_LARGE: the body is over limits.bodyBytes'),
          415: problem('BAD_REQUEST: a body that is not application/json'),
          429: problem(`RATE_LIMITED: more than ${MAX_FAILURES} failed logins from this address within a minute`),
          500: problem('INTERNAL: a bug (logged, never detailed)'),
        },
      },
    },
    async (req, reply) => {
      failures.check(req.ip)
      const principal = isShareCode(req.body.code)
        ? principals.openShare(req.body.code)
        : principalById(web.codes.redeem(req.body.code))
      if (!principal) {
        failures.add(req.ip)
        throw new ChronicleError(
          'LOGIN_INVALID',
          'this login link is wrong, used or expired: get a new one (chronicle serve prints one)',
        )
      }
      const { secret } = web.sessions.start(principal.id)
      req.log.info({ principal: principal.id }, 'web session started')
      return reply
        .status(204)
        .header('set-cookie', sessionSetCookie(secret, Math.floor(web.sessions.ttlMs / 1000), req))
        .send(null)
    },
  )
  app.post(
    '/logout',
    {
      schema: {
        operationId: 'logout',
        summary: 'end the web session whose cookie is sent, and clear the cookie',
        tags: ['web'],
        response: {
          204: noContent('logged out: Set-Cookie chronicle_session with Max-Age=0'),
          ...problems({}, { body: true }),
        },
      },
    },
    async (req, reply) => {
      const secret = sessionCookie(req)
      const session = secret === undefined ? undefined : web.sessions.find(secret)
      if (session) {
        web.sessions.end(session.id)
        onLogout(session.id)
        req.log.info({ principal: session.principal }, 'web session ended')
      }
      return reply
        .status(204)
        .header('set-cookie', sessionSetCookie('', 0, req))
        .send(null)
    },
  )
  app.post(
    '/login-links',
    {
      schema: {
        operationId: 'createLoginLink',
        summary: 'a one-time link logging a browser in as this token’s principal',
        description: 'Single use, valid 10 minutes; the code is in the fragment. Needs a token, not a web session.',
        tags: ['web'],
        body: z.object({}).strict().nullish(),
        response: {
          201: ok('the link and when it expires', Answers.loginLink),
          ...problems(
            {
              400: 'BAD_REQUEST: a body other than {}',
              403: 'a web session cannot mint links (a link is minted with a token)',
            },
            { body: true },
          ),
        },
      },
    },
    async (req, reply) => {
      if (credentialOf(req).via !== 'token')
        throw new ChronicleError('FORBIDDEN', 'a login link is minted with a token, not from a web session')
      const { code, expiresAt } = web.codes.mint(principalOf(req).id)
      return reply.status(201).send({ url: loginUrl(`${req.protocol}://${req.host}`, code), expiresAt })
    },
  )
}

/** A share link's code is `<shareId>.<secret>`; a one-time login code is base64url, which has no dot. */
function isShareCode(code: string): boolean {
  return code.startsWith('shr_') && code.includes('.')
}

/** The cookie as set (or, with an empty value and Max-Age=0, cleared); Secure when the request came over https. */
function sessionSetCookie(value: string, maxAge: number, req: FastifyRequest): string {
  const secure = req.protocol === 'https' ? '; Secure' : ''
  return `${SESSION_COOKIE}=${value}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${maxAge}${secure}`
}

/** Failed logins per address in a fixed one-minute window. */
class FailureWindow {
  private readonly windows = new Map<string, { start: number; count: number }>()

  check(address: string): void {
    const w = this.windows.get(address)
    if (w && Date.now() - w.start < WINDOW_MS && w.count >= MAX_FAILURES)
      throw new ChronicleError('RATE_LIMITED', `more than ${MAX_FAILURES} failed logins within a minute: wait a minute`)
  }

  add(address: string): void {
    const now = Date.now()
    if (this.windows.size > 10_000)
      for (const [a, w] of this.windows) if (now - w.start >= WINDOW_MS) this.windows.delete(a)
    const w = this.windows.get(address)
    if (w && now - w.start < WINDOW_MS) w.count++
    else this.windows.set(address, { start: now, count: 1 })
  }
}
