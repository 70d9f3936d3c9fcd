/**
 * What a fetched body is (docs/TOOLS.md "webfetch"): only text reaches the
 * model. A declared type must be text/*, JSON, XML, JavaScript, YAML or
 * TOML; a body without one is taken as text unless its first bytes hold a
 * NUL (binary).
 */

export interface ContentType {
  /** `type/subtype`, lower case; '' when the server sent none */
  readonly mime: string
  readonly charset: string | undefined
}

const TEXT_APPLICATIONS = new Set([
  'application/json',
  'application/xml',
  'application/javascript',
  'application/ecmascript',
  'application/x-javascript',
  'application/yaml',
  'application/x-yaml',
  'application/toml',
  'application/x-ndjson',
  'application/xhtml+xml',
])

export function parseContentType(header: string | undefined): ContentType {
  if (!header) return { mime: '', charset: undefined }
  const [mime = '', ...params] = header.split(';')
  const charset = params.map((p) => p.trim().match(/^charset\s*=\s*"?([^";\s]+)"?$/i)?.[1]).find((c) => c !== undefined)
  return { mime: mime.trim().toLowerCase(), charset: charset?.toLowerCase() }
}

export function isTextType(mime: string): boolean {
  if (mime.startsWith('text/')) return true
  if (TEXT_APPLICATIONS.has(mime)) return true
  return /^[a-z]+\/[a-z0-9.+-]+\+(json|xml)$/.test(mime)
}

export function isHtml(mime: string): boolean {
  return mime === 'text/html' || mime === 'application/xhtml+xml'
}

/** A body without a declared type: binary when its head holds a NUL byte. */
export function looksBinary(head: Buffer): boolean {
  return head.subarray(0, 1024).includes(0)
}

/** The bytes as text in the declared charset (UTF-8 when none, or one TextDecoder does not know). */
export function decodeText(bytes: Buffer, charset: string | undefined): string {
  try {
    return new TextDecoder(charset ?? 'utf-8').decode(bytes)
  } catch {
    return new TextDecoder('utf-8').decode(bytes)
  }
}
