import type { FastifyReply, FastifyRequest } from 'fastify'
import { ChronicleError } from '../../events/errors.js'
import type { App } from '../app.js'
import { NOT_BUILT_PAGE, readAsset, readIndex, type WebFile } from '../web-root.js'

/**
 * The web page's files (docs/API.md "Web page"): `/` and `/login` answer
 * its index.html, `/assets/<file>` its built files. No credential needed
 * (the page must load for a person to log in: src/http/security.ts
 * PUBLIC_ROUTES); Host and Origin are checked, and every response carries
 * the security headers (app.ts). Left out of the OpenAPI document: they
 * answer files, not the API.
 */

const ASSETS = '/assets/'

export function pageRoutes(app: App, root: string): void {
  const index = async (_req: FastifyRequest, reply: FastifyReply) => {
    const file = await readIndex(root)
    if (!file)
      return reply.status(503).type('text/html; charset=utf-8').header('cache-control', 'no-store').send(NOT_BUILT_PAGE)
    return sendFile(_req, reply, file)
  }
  app.get('/', { schema: { hide: true } }, index)
  app.get('/login', { schema: { hide: true } }, index)
  app.get('/assets/*', { schema: { hide: true } }, async (req, reply) => {
    // The path as sent, not the router's decoded parameter: an encoded `/` or `.` names no asset.
    const path = (req.url.split('?')[0] ?? '').slice(ASSETS.length)
    const file = await readAsset(root, path)
    if (!file) throw new ChronicleError('NOT_FOUND', 'no such asset')
    return sendFile(req, reply, file, HASHED.test(path))
  })
}

/**
 * A script or stylesheet the page's build named by its content (`main-<HASH>.js`, scripts/build-web.mjs): a
 * rebuild that changes it gives it another name, so the browser keeps it without asking again. A cold tab then
 * waits for no revalidation of each of them before its script runs (docs/WEB.md "The cold open").
 */
const HASHED = /(?:^|\/)[\w.-]+-[A-Z0-9]{8}\.(?:js|css)$/

/**
 * A file: a content-named one kept for a year (`immutable`), any other revalidated on each use (`no-cache` with an
 * ETag: a rebuild shows at the next load). index.html is never kept, so a rebuild's new names are seen at once.
 */
function sendFile(req: FastifyRequest, reply: FastifyReply, file: WebFile, immutable = false) {
  void reply
    .header('cache-control', immutable ? 'public, max-age=31536000, immutable' : 'no-cache')
    .header('etag', file.etag)
  if (req.headers['if-none-match'] === file.etag) return reply.status(304).send()
  return reply.type(file.type).send(file.body)
}
