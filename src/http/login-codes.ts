import { createHash, randomBytes } from 'node:crypto'

/**
 * One-time login codes for the web page (docs/API.md "Web page"): a 256-bit
 * random secret that logs a browser in as a principal, once, within ten
 * minutes. Only its sha256 is kept, with the principal's id and the expiry,
 * and only in memory: a restart invalidates every unused link. The code
 * travels in a URL's fragment (`/login#<code>`), which a browser never sends
 * to a server, so it reaches no log and no Referer; the page posts it to
 * `POST /login`, which trades it for a session cookie.
 */

export const LOGIN_CODE_TTL_MS = 10 * 60 * 1000
/** outstanding codes kept at most; minting past it forgets the oldest */
const MAX_CODES = 1000

export interface LoginCodesOptions {
  readonly ttlMs?: number
  readonly now?: () => number
}

export interface LoginCode {
  readonly code: string
  readonly expiresAt: string
}

export class LoginCodes {
  /** sha256 of a code → whom it logs in as, and until when (insertion order: oldest first) */
  private readonly codes = new Map<string, { readonly principal: string; readonly expires: number }>()
  private readonly ttlMs: number
  private readonly now: () => number

  constructor(options: LoginCodesOptions = {}) {
    this.ttlMs = options.ttlMs ?? LOGIN_CODE_TTL_MS
    this.now = options.now ?? Date.now
  }

  /** A fresh code logging in as `principal` (a principal's id: `owner` or a token id). */
  mint(principal: string): LoginCode {
    this.forgetExpired()
    while (this.codes.size >= MAX_CODES) this.codes.delete(this.codes.keys().next().value as string)
    const code = randomBytes(32).toString('base64url')
    const expires = this.now() + this.ttlMs
    this.codes.set(digest(code), { principal, expires })
    return { code, expiresAt: new Date(expires).toISOString() }
  }

  /** The principal a code logs in as, if it is known and unexpired; it is used up either way. */
  redeem(code: string): string | undefined {
    const key = digest(code)
    const entry = this.codes.get(key)
    this.codes.delete(key)
    return entry && entry.expires > this.now() ? entry.principal : undefined
  }

  private forgetExpired(): void {
    const now = this.now()
    for (const [key, entry] of this.codes) if (entry.expires <= now) this.codes.delete(key)
  }
}

/** The link a person opens: the page's login route, the code in the fragment. */
export function loginUrl(base: string, code: string): string {
  return `${base.replace(/\/+$/, '')}/login#${code}`
}

function digest(code: string): string {
  return createHash('sha256').update(code).digest('hex')
}
