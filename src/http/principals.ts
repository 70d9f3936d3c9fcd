import { createHash, randomBytes, scryptSync, timingSafeEqual } from 'node:crypto'
import { decideShareCreate, decideShareRevoke, type ShareSpec } from '../commands/shares.js'
import { decideTokenCreate, decideTokenRevoke } from '../commands/tokens.js'
import { executeFolded } from '../commands/execute-folded.js'
import type { CommandPorts } from '../commands/execute.js'
import type { ChronicleEvent, DataOf, Role, ShareRole } from '../events/catalogue.js'
import type { EventMeta, StoredEvent } from '../events/envelope.js'
import { ChronicleError } from '../events/errors.js'
import type { IdSource } from '../events/ids.js'

/**
 * Who is calling (docs/SECURITY.md "Principals and tokens"). The token the
 * server generated on first start (or the one configured) is the owner's:
 * an admin that cannot be revoked. An admin creates named tokens with a
 * role, optionally limited to some sessions (and their forks and
 * sub-agents), optionally expiring. Their management is events in the
 * system stream `sys_tokens`, so the log says who granted what, when; the
 * secret is shown once and stored only as a salted scrypt hash.
 *
 * A named token reads `<tokenId>.<secret>`: the id finds the record, the
 * scrypt check (~50 ms) runs once per token and process — a verified token's
 * sha256 is remembered — and revocation and expiry are checked every time.
 *
 * The stream is read and appended through the log port (src/events/log.ts), so either engine serves it:
 * `Principals.open` folds it, then folds each commit as it is heard; a command decides on the fold and
 * appends with the version it reached (src/commands/execute-folded.ts).
 *
 * Share links (docs/SECURITY.md "Shares") live in the same stream: a share
 * is a principal limited to one session (its forks and sub-agents), named
 * after the share, whose link logs any number of browsers in until it
 * expires or is revoked. Its link reads `<shareId>.<secret>`.
 */

export const TOKENS_STREAM = 'sys_tokens'

export interface Principal {
  /** `owner`, or the token id */
  readonly id: string
  readonly name: string
  readonly role: Role
  /** limited to these sessions (and their forks and sub-agents); absent: every session */
  readonly sessions?: readonly string[]
  /** a share link's visitor: which session was shared, by whom, until when (the page's banner) */
  readonly share?: { readonly session: string; readonly by?: string; readonly expiresAt: string }
}

export const OWNER: Principal = { id: 'owner', name: 'owner', role: 'admin' }

export interface TokenInfo {
  readonly tokenId: string
  readonly name: string
  readonly role: Role
  readonly sessions?: readonly string[]
  readonly expiresAt?: string
  readonly createdAt: string
  readonly createdBy?: string
  readonly revokedAt?: string
}

export interface ShareInfo {
  readonly shareId: string
  readonly session: string
  readonly name: string
  readonly role: ShareRole
  readonly expiresAt: string
  readonly createdAt: string
  readonly createdBy?: string
  readonly revokedAt?: string
}

interface ShareRecord extends ShareInfo {
  /** the link secret's sha256, hex */
  readonly hash: string
}

interface Record_ extends TokenInfo {
  readonly salt: string
  readonly hash: string
}

const SCRYPT = { N: 16384, r: 8, p: 1 }
/** setTimeout's longest delay (2^31 - 1 ms) */
const MAX_TIMER_MS = 2_147_483_647
const KEY_BYTES = 32

export class Principals {
  private readonly tokens = new Map<string, Record_>()
  private readonly shares = new Map<string, ShareRecord>()
  /** the version of `sys_tokens` the tokens are folded to */
  private version = 0
  /** sha256 of a presented token already checked against its scrypt hash → token id */
  private readonly verified = new Map<string, string>()
  private readonly revokedListeners = new Set<(tokenId: string) => void>()
  /** a timer per token or share with an expiry still ahead: when it passes, its listeners hear it as revoked */
  private readonly expiries = new Map<string, NodeJS.Timeout>()
  private unsubscribe: () => void = () => {}

  private constructor(
    private readonly ports: CommandPorts,
    private readonly ids: IdSource,
    private readonly ownerToken: string,
    private readonly now: () => number,
  ) {}

  /** The tokens and shares as the stream holds them, then as each commit to it is heard. */
  static async open(
    ports: CommandPorts,
    ids: IdSource,
    ownerToken: string,
    now: () => number = Date.now,
  ): Promise<Principals> {
    const principals = new Principals(ports, ids, ownerToken, now)
    // Listening before reading: a commit heard while the stream is read is folded after it, in version order.
    let heard: StoredEvent[] | undefined = []
    principals.unsubscribe = ports.log.onCommit((events) => {
      const mine = events.filter((e) => e.sessionId === TOKENS_STREAM)
      if (mine.length === 0) return
      if (heard) heard.push(...mine)
      else principals.fold(mine)
    })
    try {
      principals.fold(await ports.log.readSession(TOKENS_STREAM))
    } catch (err) {
      principals.close()
      throw err
    }
    const meanwhile = heard
    heard = undefined
    principals.fold(meanwhile)
    return principals
  }

  close(): void {
    this.unsubscribe()
    for (const timer of this.expiries.values()) clearTimeout(timer)
    this.expiries.clear()
  }

  /** The principal a presented token speaks for, or undefined (unknown, wrong, revoked or expired). */
  authenticate(presented: string): Principal | undefined {
    if (same(presented, this.ownerToken)) return OWNER
    const dot = presented.indexOf('.')
    if (dot <= 0) return undefined
    const record = this.tokens.get(presented.slice(0, dot))
    if (!record || !this.active(record)) return undefined
    const digest = createHash('sha256').update(presented).digest('hex')
    if (this.verified.get(digest) !== record.tokenId) {
      const key = scryptSync(presented.slice(dot + 1), Buffer.from(record.salt, 'base64'), KEY_BYTES, SCRYPT)
      if (!timingSafeEqual(key, Buffer.from(record.hash, 'base64'))) return undefined
      this.verified.set(digest, record.tokenId)
    }
    return principalOf(record)
  }

  /**
   * The principal a token id speaks for while its token is active (a web session speaks for its
   * principal: src/http/web-sessions.ts); undefined once it is revoked or expired.
   */
  byId(id: string): Principal | undefined {
    if (id === OWNER.id) return OWNER
    const share = this.shares.get(id)
    if (share) return this.active(share) ? sharePrincipal(share) : undefined
    const record = this.tokens.get(id)
    return record && this.active(record) ? principalOf(record) : undefined
  }

  /** Whether a principal still speaks (its token or share not revoked or expired since it connected). */
  stillValid(principal: Principal): boolean {
    if (principal.id === OWNER.id) return true
    const record = this.tokens.get(principal.id) ?? this.shares.get(principal.id)
    return record !== undefined && this.active(record)
  }

  /**
   * A new share link's code (`<shareId>.<secret>`, given out once) and its record. Decided on the shares
   * and tokens as folded and the session's read model: a missing or archived session, an expiry past, a
   * name in use are refused with nothing appended.
   */
  async createShare(spec: ShareSpec, meta: EventMeta): Promise<{ code: string; info: ShareInfo }> {
    const shareId = this.ids.next('shr')
    const secret = randomBytes(32).toString('base64url')
    const minted = { shareId, hash: sha256(secret) }
    const session = await this.ports.readModels.session(spec.session)
    await this.execute(
      () => decideShareCreate(this.shares, spec, minted, { now: this.now(), session, takenNames: this.takenNames() }),
      meta,
    )
    return { code: `${shareId}.${secret}`, info: shareInfo(this.shares.get(shareId) as ShareRecord) }
  }

  /** Every share (of one session, when named), never a secret or hash. */
  listShares(session?: string): ShareInfo[] {
    return [...this.shares.values()].filter((s) => session === undefined || s.session === session).map(shareInfo)
  }

  /** The share, or SHARE_NOT_FOUND. */
  share(shareId: string): ShareInfo {
    const share = this.shares.get(shareId)
    if (!share) throw new ChronicleError('SHARE_NOT_FOUND', `no share ${shareId}`)
    return shareInfo(share)
  }

  async revokeShare(shareId: string, meta: EventMeta): Promise<ShareInfo> {
    await this.execute(() => decideShareRevoke(this.shares, shareId), meta)
    return shareInfo(this.shares.get(shareId) as ShareRecord)
  }

  /**
   * The principal a share link's code logs in as. A code whose secret does not match is undefined (a
   * guess learns nothing); the right secret of a revoked or expired share is SHARE_REVOKED or SHARE_EXPIRED,
   * so whoever was given the link is told why it stopped working.
   */
  openShare(code: string): Principal | undefined {
    const dot = code.indexOf('.')
    if (dot <= 0) return undefined
    const share = this.shares.get(code.slice(0, dot))
    if (!share) return undefined
    if (!timingSafeEqual(Buffer.from(sha256(code.slice(dot + 1)), 'hex'), Buffer.from(share.hash, 'hex')))
      return undefined
    if (share.revokedAt) throw new ChronicleError('SHARE_REVOKED', `this share link was revoked at ${share.revokedAt}`)
    if (!this.active(share)) throw new ChronicleError('SHARE_EXPIRED', `this share link expired at ${share.expiresAt}`)
    return sharePrincipal(share)
  }

  /** Tells the listeners when `id`'s expiry passes (a timer holds at most ~24 days: a later one is set again). */
  private expireAt(id: string, expiresAt: string): void {
    const wait = Date.parse(expiresAt) - this.now()
    if (wait <= 0) return // expired already: nothing can have opened with it since
    this.stopExpiry(id)
    const timer = setTimeout(
      () => {
        this.expiries.delete(id)
        if (Date.parse(expiresAt) > this.now()) return this.expireAt(id, expiresAt)
        for (const listener of this.revokedListeners) listener(id)
      },
      Math.min(wait, MAX_TIMER_MS),
    )
    timer.unref()
    this.expiries.set(id, timer)
  }

  private stopExpiry(id: string): void {
    clearTimeout(this.expiries.get(id))
    this.expiries.delete(id)
  }

  private takenNames(): Set<string> {
    const names = new Set([OWNER.name])
    for (const t of this.tokens.values()) if (this.active(t)) names.add(t.name)
    return names
  }

  async create(
    spec: { name: string; role: Role; sessions?: readonly string[]; expiresAt?: string },
    meta: EventMeta,
  ): Promise<{ token: string; info: TokenInfo }> {
    const tokenId = this.ids.next('tok')
    const secret = randomBytes(32).toString('base64url')
    const salt = randomBytes(16)
    const minted = {
      tokenId,
      salt: salt.toString('base64'),
      hash: scryptSync(secret, salt, KEY_BYTES, SCRYPT).toString('base64'),
    }
    await this.execute(
      () =>
        decideTokenCreate(this.tokens, spec, minted, {
          now: this.now(),
          ownerName: OWNER.name,
          shareNames: this.activeShareNames(),
        }),
      meta,
    )
    return { token: `${tokenId}.${secret}`, info: this.info(this.tokens.get(tokenId) as Record_) }
  }

  list(): TokenInfo[] {
    return [...this.tokens.values()].map((t) => this.info(t))
  }

  async revoke(tokenId: string, meta: EventMeta): Promise<TokenInfo> {
    await this.execute(() => decideTokenRevoke(this.tokens, tokenId, { ownerId: OWNER.id }), meta)
    return this.info(this.tokens.get(tokenId) as Record_)
  }

  /**
   * Decides on the tokens as folded and appends with the stream's version they were folded to: another
   * server's token event in between (one database, two servers) is a VERSION_CONFLICT — its events are
   * read, and the command decided again on them.
   */
  private async execute(decide: () => ChronicleEvent[], meta: EventMeta): Promise<void> {
    const folded = { version: () => this.version, fold: (events: readonly StoredEvent[]) => this.fold(events) }
    await executeFolded(this.ports.log, TOKENS_STREAM, folded, decide, { meta, durability: 'full' })
  }

  /**
   * Hears of every revocation once it is committed, and of every expiry when it passes (open sockets of the
   * token or share are closed: a subscription would otherwise go on carrying events to an expired share).
   */
  onRevoked(listener: (tokenId: string) => void): () => void {
    this.revokedListeners.add(listener)
    return () => this.revokedListeners.delete(listener)
  }

  private activeShareNames(): Set<string> {
    const names = new Set<string>()
    for (const s of this.shares.values()) if (this.active(s)) names.add(s.name)
    return names
  }

  private active(record: { readonly revokedAt?: string; readonly expiresAt?: string }): boolean {
    return !record.revokedAt && (record.expiresAt === undefined || Date.parse(record.expiresAt) > this.now())
  }

  private info(t: Record_): TokenInfo {
    const { salt: _salt, hash: _hash, ...info } = t
    return info
  }

  private fold(events: readonly StoredEvent[]): void {
    for (const e of events) this.foldOne(e)
  }

  private foldOne(e: { type: string; version: number; data: unknown; at: string; meta: EventMeta }): void {
    if (e.version <= this.version) return // read again after a conflict, then heard as committed
    this.version = e.version
    if (e.type === 'token.created') {
      const d = e.data as DataOf<'token.created'>
      this.tokens.set(d.tokenId, {
        tokenId: d.tokenId,
        name: d.name,
        role: d.role,
        ...(d.sessions && { sessions: d.sessions }),
        ...(d.expiresAt && { expiresAt: d.expiresAt }),
        createdAt: e.at,
        ...(e.meta.by && { createdBy: e.meta.by.name }),
        salt: d.salt,
        hash: d.hash,
      })
      if (d.expiresAt) this.expireAt(d.tokenId, d.expiresAt)
    } else if (e.type === 'token.revoked') {
      const { tokenId } = e.data as DataOf<'token.revoked'>
      const record = this.tokens.get(tokenId)
      if (record) this.tokens.set(tokenId, { ...record, revokedAt: e.at })
      for (const [digest, id] of this.verified) if (id === tokenId) this.verified.delete(digest)
      this.stopExpiry(tokenId)
      for (const listener of this.revokedListeners) listener(tokenId)
    } else if (e.type === 'share.created') {
      const d = e.data as DataOf<'share.created'>
      this.shares.set(d.shareId, {
        shareId: d.shareId,
        session: d.session,
        name: d.name,
        role: d.role,
        expiresAt: d.expiresAt,
        createdAt: e.at,
        ...(e.meta.by && { createdBy: e.meta.by.name }),
        hash: d.hash,
      })
      this.expireAt(d.shareId, d.expiresAt)
    } else if (e.type === 'share.revoked') {
      const { shareId } = e.data as DataOf<'share.revoked'>
      const record = this.shares.get(shareId)
      if (record) this.shares.set(shareId, Object.assign({}, record, { revokedAt: e.at }))
      this.stopExpiry(shareId)
      for (const listener of this.revokedListeners) listener(shareId)
    }
  }
}

function sharePrincipal(share: ShareRecord): Principal {
  return {
    id: share.shareId,
    name: share.name,
    role: share.role,
    sessions: [share.session],
    share: { session: share.session, ...(share.createdBy && { by: share.createdBy }), expiresAt: share.expiresAt },
  }
}

function shareInfo(share: ShareRecord): ShareInfo {
  const { hash: _hash, ...info } = share
  return info
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

function principalOf(record: Record_): Principal {
  return {
    id: record.tokenId,
    name: record.name,
    role: record.role,
    ...(record.sessions && { sessions: record.sessions }),
  }
}

function same(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest()
  const hb = createHash('sha256').update(b).digest()
  return timingSafeEqual(ha, hb)
}
