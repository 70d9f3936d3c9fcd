/**
 * Why the server will not open a connection (docs/SECURITY.md "Server-side
 * request forgery"). The codes are stable: tools put them at the head of
 * their error message, so the model, the log and a person read the same word.
 */
export type RefusalCode =
  /** not a URL at all */
  | 'URL_INVALID'
  /** a scheme other than http: and https: (file:, ftp:, data:, gopher:, …) */
  | 'SCHEME_REFUSED'
  /** user:password@ in the URL (it would be sent, and it hides where the URL goes) */
  | 'URL_CREDENTIALS'
  /** the name does not resolve */
  | 'DNS_FAILED'
  /** the address (as written, or resolved) is not a public unicast address */
  | 'ADDRESS_REFUSED'
  /** the Chronicle server's own listening port on this machine */
  | 'OWN_SERVER'
  /** the sandbox's proxy: the host is not on the user's `sandbox.network` list */
  | 'HOST_NOT_LISTED'
  /** the sandbox's proxy: the host was asked for and the rules or a person said no */
  | 'HOST_DENIED'

export class NetRefusal extends Error {
  override readonly name = 'NetRefusal'
  constructor(
    readonly code: RefusalCode,
    message: string,
  ) {
    super(`${code}: ${message}`)
  }
}
