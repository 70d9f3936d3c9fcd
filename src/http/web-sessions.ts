import { createHmac, randomBytes } from 'node:crypto'
import {
  chmodSync,
  closeSync,
  fsyncSync,
  lstatSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  type Stats,
  writeSync,
} from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { z } from 'zod'
import { ChronicleError } from '../events/errors.js'

/**
 * The web page's sessions (docs/SECURITY.md "The web page"): a browser that
 * traded a login code for the `chronicle_session` cookie holds a 256-bit
 * secret; the server keeps, per session, an HMAC of that secret keyed with
 * the owner's token, the principal it speaks for, and when it was created
 * and expires (30 days). Replacing the owner's token therefore ends every
 * web session, as it ends everything the old token opened.
 *
 * Sessions survive a restart: they live in `<dataDir>/web-sessions.json`
 * (0600, this user's regular file, written whole to a temporary file and
 * renamed over the old one). Not in the event log: a web session is a
 * revocable credential, not a fact about the work — its state changes
 * (logout, expiry), and an append-only log would keep every dead one.
 * A session speaks for its principal only while that principal's token is
 * active (src/http/app.ts asks Principals on every request).
 */

export const WEB_SESSIONS_FILE = 'web-sessions.json'
export const WEB_SESSION_TTL_MS = 30 * 24 * 60 * 60 * 1000
/** live sessions kept at most; starting one past it ends the oldest */
const MAX_SESSIONS = 1000

export interface WebSession {
  /** the stored HMAC of the cookie's secret: names the session, never opens it */
  readonly id: string
  /** the principal it speaks for: `owner` or a token id */
  readonly principal: string
  readonly createdAt: string
  readonly expiresAt: string
}

export interface WebSessionsOptions {
  /** where sessions are kept; absent: in memory only */
  readonly file?: string
  /** keys the stored HMACs: the owner's token */
  readonly key: string
  readonly ttlMs?: number
  readonly now?: () => number
  /** told when a file that cannot be read as sessions is set aside (every browser logs in again) */
  readonly warn?: (message: string) => void
}

const Stored = z.object({
  version: z.literal(1),
  sessions: z.array(
    z.object({
      id: z.string().regex(/^[0-9a-f]{64}$/),
      principal: z.string().min(1),
      createdAt: z.iso.datetime(),
      expiresAt: z.iso.datetime(),
    }),
  ),
})

export class WebSessions {
  private readonly sessions = new Map<string, WebSession>()
  /** how long a session lasts (the cookie's Max-Age) */
  readonly ttlMs: number
  private readonly now: () => number

  constructor(private readonly options: WebSessionsOptions) {
    this.ttlMs = options.ttlMs ?? WEB_SESSION_TTL_MS
    this.now = options.now ?? Date.now
    if (options.file) for (const s of load(options.file, options.warn)) this.sessions.set(s.id, s)
  }

  /** A new session for `principal`: its secret (the cookie's value, given out once) and its record. */
  start(principal: string): { readonly secret: string; readonly session: WebSession } {
    this.forgetExpired()
    const oldest = [...this.sessions.values()].sort((a, b) => a.createdAt.localeCompare(b.createdAt))
    for (const s of oldest.slice(0, Math.max(0, this.sessions.size - MAX_SESSIONS + 1))) this.sessions.delete(s.id)
    const secret = randomBytes(32).toString('base64url')
    const now = this.now()
    const session: WebSession = {
      id: this.idOf(secret),
      principal,
      createdAt: new Date(now).toISOString(),
      expiresAt: new Date(now + this.ttlMs).toISOString(),
    }
    this.sessions.set(session.id, session)
    this.save()
    return { secret, session }
  }

  /** The unexpired session a cookie's secret opens, if any. */
  find(secret: string): WebSession | undefined {
    const session = this.sessions.get(this.idOf(secret))
    return session && Date.parse(session.expiresAt) > this.now() ? session : undefined
  }

  /** Ends one session (logout); false if there was none. */
  end(id: string): boolean {
    if (!this.sessions.delete(id)) return false
    this.save()
    return true
  }

  /** Ends every session of a principal (its token was revoked); how many there were. */
  endFor(principal: string): number {
    const ended = [...this.sessions.values()].filter((s) => s.principal === principal)
    for (const s of ended) this.sessions.delete(s.id)
    if (ended.length > 0) this.save()
    return ended.length
  }

  private idOf(secret: string): string {
    return createHmac('sha256', this.options.key).update(secret).digest('hex')
  }

  private forgetExpired(): void {
    const now = this.now()
    for (const s of this.sessions.values()) if (Date.parse(s.expiresAt) <= now) this.sessions.delete(s.id)
  }

  private save(): void {
    if (!this.options.file) return
    writeAtomically(this.options.file, `${JSON.stringify({ version: 1, sessions: [...this.sessions.values()] })}\n`)
  }
}

/** The stored sessions; none when there is no file. An unsafe file is refused; an unreadable one set aside. */
function load(file: string, warn: ((message: string) => void) | undefined): WebSession[] {
  let stat: Stats
  try {
    stat = lstatSync(file)
  } catch {
    return []
  }
  if (!stat.isFile())
    throw new ChronicleError(
      'FORBIDDEN',
      `${file} is not a regular file (a symlink or device in the data directory is refused)`,
    )
  const uid = process.getuid?.()
  if (uid !== undefined && stat.uid !== uid)
    throw new ChronicleError('FORBIDDEN', `${file} belongs to user ${stat.uid}, not to this server's user ${uid}`)
  if ((stat.mode & 0o077) !== 0) chmodSync(file, 0o600)
  try {
    return Stored.parse(JSON.parse(readFileSync(file, 'utf8'))).sessions
  } catch (err) {
    warn?.(
      `${file} holds no web sessions this server can read (${(err as Error).message.split('\n')[0]}): every browser logs in again`,
    )
    return []
  }
}

/** Writes the whole file anew: a private temporary file beside it, flushed, then renamed over it. */
function writeAtomically(file: string, text: string): void {
  const temp = join(dirname(file), `.${basename(file)}.${randomBytes(6).toString('hex')}.tmp`)
  const fd = openSync(temp, 'wx', 0o600)
  try {
    writeSync(fd, text)
    fsyncSync(fd)
  } catch (err) {
    closeSync(fd)
    rmSync(temp, { force: true })
    throw err
  }
  closeSync(fd)
  renameSync(temp, file)
}
