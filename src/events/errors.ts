/**
 * The closed set of error codes every layer speaks. HTTP maps them to
 * problem+json and WebSocket replies carry them verbatim (docs/API.md "Errors").
 */
export const ERROR_STATUS = {
  BAD_REQUEST: 400,
  UNKNOWN_METHOD: 400,
  /** a search query that does not parse (details.position: the offset where it failed): docs/SEARCH.md */
  BAD_QUERY: 400,
  UNAUTHORIZED: 401,
  /** the web page's login (`POST /login`) with a code that is wrong, used or expired */
  LOGIN_INVALID: 401,
  FORBIDDEN: 403,
  SESSION_NOT_FOUND: 404,
  SEQ_OUT_OF_RANGE: 404,
  PERMISSION_REQUEST_NOT_FOUND: 404,
  RULE_NOT_FOUND: 404,
  /** an elicitation that is not pending: unknown, or already answered (docs/TOOLS.md "Elicitation") */
  ELICITATION_NOT_FOUND: 404,
  /** an elicitation answer whose content does not match the server's requested schema; nothing was appended */
  ELICITATION_INVALID: 400,
  /** a path or tree that a workspace snapshot does not hold (a file over the size cap is listed, not stored) */
  NOT_IN_SNAPSHOT: 404,
  INPUT_CONFLICT: 409,
  VERSION_CONFLICT: 409,
  SESSION_ARCHIVED: 409,
  /** an imported session: its history is kept to read and fork, never to act on */
  SESSION_READ_ONLY: 409,
  /** a fork of imported history without the directory the child is to work in */
  DIRECTORY_REQUIRED: 400,
  /** a session directory that no longer exists (or is not a directory): nothing to snapshot or restore */
  WORKSPACE_MISSING: 409,
  /** a snapshot materialized into a directory that exists and is not empty */
  DIRECTORY_NOT_EMPTY: 409,
  /** a session with a run, a revert or a fork materialization in progress: the command waits for it to end */
  SESSION_BUSY: 409,
  /** a revert or unrevert would overwrite files changed outside the agent (details.files); `force` overrides */
  WORKSPACE_CONFLICT: 409,
  /** unrevert without a revert to undo (none, or a later input made it final) */
  NOTHING_TO_UNREVERT: 409,
  /** a session with no recorded workspace (snapshots off, or no step has run): nothing to revert to */
  NO_WORKSPACE_HISTORY: 409,
  /** a revert to before the session's latest compaction: the model's context starts at its summary */
  REVERT_BEFORE_COMPACTION: 409,
  /** a session directory inside Chronicle's data dir (other than a fork's own under forks/) */
  DIRECTORY_FORBIDDEN: 400,
  /** an import file that is not a valid Chronicle export (the message names the line); nothing was appended */
  IMPORT_INVALID: 400,
  /** token.create with a name an active token has */
  TOKEN_NAME_TAKEN: 409,
  /** token.revoke of a token this server never issued */
  TOKEN_NOT_FOUND: 404,
  /** token.revoke of a token already revoked */
  TOKEN_REVOKED: 409,
  /** share.create with a name an active share or token has (a share's name is what its visitors' events are attributed to) */
  SHARE_NAME_TAKEN: 409,
  /** share.revoke of a share this server never made */
  SHARE_NOT_FOUND: 404,
  /** a share link opened after its share was revoked; share.revoke of one already revoked */
  SHARE_REVOKED: 410,
  /** a share link opened after its expiry */
  SHARE_EXPIRED: 410,
  /** an ATIF export of a session with no message: the format needs at least one step */
  NOTHING_TO_EXPORT: 409,
  NO_MODEL_CONFIGURED: 422,
  UNKNOWN_AGENT: 422,
  UNKNOWN_MODEL: 422,
  EMPTY_INPUT: 400,
  /** a file part's path that does not exist */
  FILE_NOT_FOUND: 404,
  /** a file part's path outside the session directory (a symlink out of it included) */
  FILE_FORBIDDEN: 403,
  /** a file part's path that is a directory or another non-regular file */
  NOT_A_FILE: 400,
  /** a file whose media type cannot be sent to a model: not text, an image or a PDF, and not UTF-8 */
  UNSUPPORTED_MEDIA_TYPE: 415,
  INVALID_EVENT: 400,
  PAYLOAD_TOO_LARGE: 413,
  RATE_LIMITED: 429,
  /** an HTTP route that does not exist */
  NOT_FOUND: 404,
  /** a protocol operation whose module is not wired into this server */
  NOT_IMPLEMENTED: 501,
  CORRUPT_EVENT: 500,
  /** a blob an event names (step.started's context) is not in the store */
  BLOB_MISSING: 500,
  /** a blob whose content no longer matches its hash: the store was edited */
  BLOB_CORRUPT: 500,
  INTERNAL: 500,
  /**
   * (cluster) the session is owned by another node, or by none yet: nothing was appended (docs/CLUSTER.md);
   * details.owner names the owner's node id
   */
  NOT_OWNER: 421,
  /** the event store cannot be reached (a PostgreSQL server down or unreachable): nothing was appended */
  STORE_UNAVAILABLE: 503,
  /** `chronicle store copy` into a database that already holds a log */
  STORE_NOT_EMPTY: 409,
  /** the store's file fails its integrity check (SQLite's quick_check, or the hash chain's last events): not served */
  STORE_DAMAGED: 500,
  /** the data directory's filesystem is (nearly) full: nothing was written */
  STORAGE_FULL: 507,
  /** a backup that fails its checks before a restore (docs/BACKUP.md): nothing was replaced */
  BACKUP_INVALID: 400,
  /** a backup asked for while another runs, or into a path that exists */
  BACKUP_REFUSED: 409,
  /** a workspace object the log names is missing from the object store or damaged (docs/BACKUP.md) */
  WORKSPACE_DAMAGED: 500,
  /** a store written by a newer Chronicle (a schema migration this one does not know): refused, left as it is */
  STORE_TOO_NEW: 500,
  /** a schema migration failed on opening the store: every pending one was rolled back, the file is as it was */
  MIGRATION_FAILED: 500,
  /** the PostgreSQL server is older than the store supports (15) */
  STORE_UNSUPPORTED: 503,
  /** the search index cannot answer (its worker failed to start or stopped): docs/SEARCH.md */
  SEARCH_UNAVAILABLE: 503,
} as const

export type ErrorCode = keyof typeof ERROR_STATUS

export class ChronicleError extends Error {
  override readonly name = 'ChronicleError'
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message)
  }

  get status(): number {
    return ERROR_STATUS[this.code]
  }
}

export function isChronicleError(err: unknown, code?: ErrorCode): err is ChronicleError {
  return err instanceof ChronicleError && (code === undefined || err.code === code)
}
