/**
 * A refusal from the server (its stable `code` and message, docs/API.md
 * "Errors"), or a transport failure: `UNREACHABLE` (no server answered),
 * `CLOSED` (the connection ended before the reply), `REFUSED` (the upgrade
 * was answered with an HTTP error).
 */
export class ApiError extends Error {
  override readonly name = 'ApiError'
  constructor(
    /** the HTTP status; 0 over WebSocket and for transport failures */
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message)
  }
}
