import { closeSync, fstatSync, openSync, readSync, statSync } from 'node:fs'
import { basename, extname } from 'node:path'
import type { InputPart } from '../../events/catalogue.js'
import { ChronicleError } from '../../events/errors.js'
import type { EventLog } from '../../events/log.js'
import type { ReadModels } from '../../projections/read-models.js'
import { isForbidden, resolveInWorkspace } from '../../tools/paths.js'

/**
 * Files attached by path are read when the input is submitted
 * (docs/API.md "Files"): the model is sent what the file held then, and the
 * log keeps it — content-addressed in the blob store, named by the part in
 * `input.accepted` — so the request can be rebuilt later (docs/AUDIT.md).
 *
 * A path is hostile input: it must resolve (symlinks followed) inside the
 * session directory and outside Chronicle's data dir and config, be a
 * regular file, and be at most `maxBytes`. Its media type is the one given,
 * else the one its extension names; a file of unknown type is text when it
 * decodes as UTF-8 and refused otherwise. Text is kept as UTF-8, images and
 * PDFs as base64; other binary types are refused.
 */

export const DEFAULT_MAX_FILE_BYTES = 5 * 1024 * 1024

export interface AttachDeps {
  /** where the session's directory is read and the contents put */
  readonly ports: { readonly log: EventLog; readonly readModels: ReadModels }
  /** Chronicle's own data dir and config file: never attached, even from inside a session directory */
  readonly forbidden?: readonly string[]
  readonly maxBytes?: number
}

export function createAttacher(
  deps: AttachDeps,
): (sessionId: string, parts: readonly InputPart[]) => Promise<InputPart[]> {
  const maxBytes = deps.maxBytes ?? DEFAULT_MAX_FILE_BYTES
  return async (sessionId, parts) => {
    const session = await deps.ports.readModels.session(sessionId)
    if (!session) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)
    // every file read and checked before any content is stored: one refused file stores nothing
    const read = parts.map((part) => {
      if (part.type !== 'file' || part.path === undefined) return part
      const { bytes, display } = readConfined(session.directory, part.path, maxBytes, deps.forbidden ?? [])
      const mediaType = part.mediaType ?? mediaTypeOf(display)
      const encoding = encodingOf(mediaType, bytes, display)
      const content = encoding === 'utf8' ? bytes.toString('utf8') : bytes.toString('base64')
      return {
        part,
        content,
        mediaType: mediaType ?? 'text/plain',
        filename: part.filename ?? basename(display),
        size: bytes.length,
        encoding,
      }
    })
    return Promise.all(
      read.map(async (r) => {
        if (!('content' in r)) return r
        const { part, content, ...fields } = r
        return { ...part, ...fields, blob: await deps.ports.log.blobs.put(content) }
      }),
    )
  }
}

function readConfined(
  directory: string,
  path: string,
  maxBytes: number,
  forbidden: readonly string[],
): { bytes: Buffer; display: string } {
  const resolved = resolveInWorkspace(directory, path)
  if (!resolved.inside || isForbidden(resolved.real, forbidden, directory))
    throw new ChronicleError('FILE_FORBIDDEN', `${path} is outside the session directory ${directory}`)
  let stat: ReturnType<typeof statSync>
  try {
    stat = statSync(resolved.real)
  } catch {
    throw new ChronicleError('FILE_NOT_FOUND', `no file ${resolved.display} in the session directory`)
  }
  if (!stat.isFile()) throw new ChronicleError('NOT_A_FILE', `${resolved.display} is not a regular file`)
  if (stat.size > maxBytes) throw tooLarge(resolved.display, stat.size, maxBytes)
  // read from one descriptor, at most maxBytes + 1: a file that grows after the stat is still refused, never read whole
  const fd = openSync(resolved.real, 'r')
  try {
    if (!fstatSync(fd).isFile()) throw new ChronicleError('NOT_A_FILE', `${resolved.display} is not a regular file`)
    const buf = Buffer.alloc(Math.min(stat.size, maxBytes) + 1)
    let length = 0
    for (let n = 1; n > 0 && length < buf.length; length += n) n = readSync(fd, buf, length, buf.length - length, null)
    if (length > maxBytes) throw tooLarge(resolved.display, length, maxBytes)
    return { bytes: buf.subarray(0, length), display: resolved.display }
  } finally {
    closeSync(fd)
  }
}

const tooLarge = (display: string, bytes: number, limit: number) =>
  new ChronicleError('PAYLOAD_TOO_LARGE', `${display} is ${bytes} bytes; a file part may be at most ${limit}`, {
    bytes,
    limit,
  })

const TYPES: Record<string, string> = {
  '.txt': 'text/plain',
  '.md': 'text/markdown',
  '.csv': 'text/csv',
  '.html': 'text/html',
  '.css': 'text/css',
  '.js': 'text/javascript',
  '.mjs': 'text/javascript',
  '.ts': 'text/x-typescript',
  '.json': 'application/json',
  '.xml': 'application/xml',
  '.yaml': 'application/yaml',
  '.yml': 'application/yaml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.pdf': 'application/pdf',
  '.zip': 'application/zip',
  '.gz': 'application/gzip',
  '.wasm': 'application/wasm',
}

function mediaTypeOf(path: string): string | undefined {
  return TYPES[extname(path).toLowerCase()]
}

/** Whether a media type is text a model reads as such. */
export function isTextType(mediaType: string): boolean {
  return (
    mediaType.startsWith('text/') ||
    /^application\/(json|xml|yaml|javascript|x-sh|toml)$/.test(mediaType) ||
    /\+(json|xml)$/.test(mediaType)
  )
}

function encodingOf(mediaType: string | undefined, bytes: Buffer, display: string): 'utf8' | 'base64' {
  if (mediaType?.startsWith('image/') || mediaType === 'application/pdf') return 'base64'
  if (mediaType !== undefined && isTextType(mediaType)) return 'utf8'
  if (mediaType === undefined && isUtf8(bytes)) return 'utf8'
  throw new ChronicleError(
    'UNSUPPORTED_MEDIA_TYPE',
    `${display} is ${mediaType ?? 'of unknown type and not UTF-8 text'}: a file part is sent as text, an image or a PDF`,
  )
}

function isUtf8(bytes: Buffer): boolean {
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes)
    return true
  } catch {
    return false
  }
}
