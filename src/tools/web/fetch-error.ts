/**
 * A fetch that reached no usable page: the code (stable, at the head of the
 * message) says why. Refusals before any connection are NetRefusal
 * (src/tools/net/refusal.ts).
 */
export type FetchErrorCode =
  /** the connection failed or broke */
  | 'FETCH_FAILED'
  /** the page did not arrive within the call's timeout */
  | 'TIMEOUT'
  /** more redirects than the limit */
  | 'TOO_MANY_REDIRECTS'
  /** the server answered with an error status */
  | 'HTTP_STATUS'
  /** a content type that is not text (images, archives, PDFs, octet streams…) */
  | 'CONTENT_TYPE_REFUSED'
  /** a Content-Encoding this client does not decode */
  | 'ENCODING_REFUSED'
  /** the HTML could not be converted to Markdown or text in time (or the converter failed) */
  | 'CONVERSION_FAILED'

export class FetchError extends Error {
  override readonly name = 'FetchError'
  constructor(
    readonly code: FetchErrorCode,
    message: string,
  ) {
    super(`${code}: ${message}`)
  }
}
