import { readFile, realpath, stat } from 'node:fs/promises'
import { extname, join, sep } from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * The built web page's files (docs/API.md "Web page"): `index.html` and
 * `assets/…` under one root directory, read on each request (a rebuild
 * needs no restart). Nothing outside the root is ever read: an asset path
 * is made of plain names only (letters, digits, `.`, `_`, `-`; no
 * percent-encoding, no empty, `.` or `..` segment), and the file it names
 * must resolve, symlinks followed, to a regular file inside the root.
 */

/**
 * `<package root>/dist/web`, where the page's build writes: the same two
 * levels up from src/http/ (tsx, tests) and from dist/http/ (the package).
 */
export const DEFAULT_WEB_ROOT = fileURLToPath(new URL('../../dist/web', import.meta.url))

export interface WebFile {
  readonly body: Buffer
  readonly type: string
  /** a weak validator from size and mtime (If-None-Match) */
  readonly etag: string
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.avif': 'image/avif',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.woff': 'font/woff',
  '.ttf': 'font/ttf',
  '.otf': 'font/otf',
  '.wasm': 'application/wasm',
}

const NAME = /^[A-Za-z0-9_][A-Za-z0-9._-]*$/
const MAX_PATH = 300
const MAX_DEPTH = 8

/** The content type of a file name (application/octet-stream for a kind the page is not known to use). */
export function contentTypeOf(name: string): string {
  return TYPES[extname(name).toLowerCase()] ?? 'application/octet-stream'
}

/** The page's `index.html`, or undefined when the root holds none (the page is not built). */
export function readIndex(root: string): Promise<WebFile | undefined> {
  return readInside(root, ['index.html'])
}

/**
 * The file `assets/<path>` names, `path` as it came in the request's URL
 * (still percent-encoded); undefined for any path that is not plainly a file
 * inside the root's assets directory.
 */
export function readAsset(root: string, path: string): Promise<WebFile | undefined> {
  if (path.length > MAX_PATH) return Promise.resolve(undefined)
  const names = path.split('/')
  if (names.length > MAX_DEPTH || !names.every((n) => NAME.test(n))) return Promise.resolve(undefined)
  return readInside(root, ['assets', ...names])
}

async function readInside(root: string, names: readonly string[]): Promise<WebFile | undefined> {
  try {
    const base = await realpath(root)
    const real = await realpath(join(base, ...names))
    if (!real.startsWith(base.endsWith(sep) ? base : base + sep)) return undefined // a symlink out of the root
    const info = await stat(real)
    if (!info.isFile()) return undefined
    const body = await readFile(real)
    return {
      body,
      type: contentTypeOf(real),
      etag: `W/"${info.size.toString(36)}-${Math.trunc(info.mtimeMs).toString(36)}"`,
    }
  } catch {
    return undefined // no root, no such file, unreadable
  }
}

/** What `/` answers while the root holds no index.html: plain HTML, no script or style (the CSP allows none inline). */
export const NOT_BUILT_PAGE = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Chronicle — the web page is not built</title></head>
<body>
<h1>The web page is not built</h1>
<p>Chronicle is running, but its web page has not been built. Run <code>npm run build</code> in Chronicle's directory, then reload this page.</p>
<p>The HTTP and WebSocket API work as usual (docs/API.md).</p>
</body>
</html>
`
