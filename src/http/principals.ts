import { createHash, randomBytes, scryptSync, timingSafeEqual } from 'node:crypto'
import type { DataOf, Role } from '../events/catalogue.js'
import type { EventMeta } from '../events/envelope.js'
import { ChronicleError } from '../events/errors.js'
import type { IdSource } from '../events/ids.js'
import type { EventStore } from '../events/store.js'

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
 */

export const TOKENS_STREAM = 'sys_tokens'

export interface Principal {
  /** `owner`, or the token id */
  readonly id: string
  readonly name: string
  readonly role: Role
  /** limited to these sessions (and their forks and sub-agents); absent: every session */
  readonly sessions?: readonly string[]
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

interface Record_ extends TokenInfo {
  readonly salt: string
  readonly hash: string
}

const SCRYPT = { N: 16384, r: 8, p: 1 }
const KEY_BYTES = 32

export class Principals {
  private readonly tokens = new Map<string, Record_>()
  /** sha256 of a presented token already checked against its scrypt hash → token id */
  private readonly verified = new Map<string, string>()
  private readonly revokedListeners = new Set<(tokenId: string) => void>()
  private readonly unsubscribe: () => void

  constructor(
    private readonly store: EventStore,
    private readonly ids: IdSource,
    private readonly ownerToken: string,
    private readonly now: () => number = Date.now,
  ) {
    store.flush()
    for (const e of store.readSession(TOKENS_STREAM)) this.fold(e)
    this.unsubscribe = store.onCommit((events) => {
      for (const e of events) if (e.sessionId === TOKENS_STREAM) this.fold(e)
    })
  }

  close(): void {
    this.unsubscribe()
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
    const record = this.tokens.get(id)
    return record && this.active(record) ? principalOf(record) : undefined
  }

  /** Whether a principal still speaks (its token not revoked or expired since it connected). */
  stillValid(principal: Principal): boolean {
    if (principal.id === OWNER.id) return true
    const record = this.tokens.get(principal.id)
    return record !== undefined && this.active(record)
  }

  create(
    spec: { name: string; role: Role; sessions?: readonly string[]; expiresAt?: string },
    meta: EventMeta,
  ): { token: string; info: TokenInfo } {
    if (spec.expiresAt !== undefined && Date.parse(spec.expiresAt) <= this.now())
      throw new ChronicleError('BAD_REQUEST', `the expiry ${spec.expiresAt} is in the past`)
    if ([...this.tokens.values()].some((t) => t.name === spec.name && !t.revokedAt) || spec.name === OWNER.name)
      throw new ChronicleError('TOKEN_NAME_TAKEN', `a token named ${spec.name} exists`)
    const tokenId = this.ids.next('tok')
    const secret = randomBytes(32).toString('base64url')
    const salt = randomBytes(16)
    const hash = scryptSync(secret, salt, KEY_BYTES, SCRYPT)
    const data: DataOf<'token.created'> = {
      tokenId,
      name: spec.name,
      role: spec.role,
      ...(spec.sessions && { sessions: [...spec.sessions] }),
      ...(spec.expiresAt !== undefined && { expiresAt: new Date(spec.expiresAt).toISOString() }),
      salt: salt.toString('base64'),
      hash: hash.toString('base64'),
    }
    this.store.append(TOKENS_STREAM, [{ type: 'token.created', data }], { meta, durability: 'full' })
    return { token: `${tokenId}.${secret}`, info: this.info(this.tokens.get(tokenId) as Record_) }
  }

  list(): TokenInfo[] {
    return [...this.tokens.values()].map((t) => this.info(t))
  }

  revoke(tokenId: string, meta: EventMeta): TokenInfo {
    if (tokenId === OWNER.id)
      throw new ChronicleError(
        'FORBIDDEN',
        "the owner's token is revoked by replacing it (CHRONICLE_TOKEN or the data dir's token file)",
      )
    const record = this.tokens.get(tokenId)
    if (!record) throw new ChronicleError('TOKEN_NOT_FOUND', `no token ${tokenId}`)
    if (record.revokedAt)
      throw new ChronicleError('TOKEN_REVOKED', `token ${tokenId} was revoked at ${record.revokedAt}`)
    this.store.append(TOKENS_STREAM, [{ type: 'token.revoked', data: { tokenId } }], { meta, durability: 'full' })
    return this.info(this.tokens.get(tokenId) as Record_)
  }

  /** Hears of every revocation once it is committed (open sockets of the token are closed). */
  onRevoked(listener: (tokenId: string) => void): () => void {
    this.revokedListeners.add(listener)
    return () => this.revokedListeners.delete(listener)
  }

  private active(record: Record_): boolean {
    return !record.revokedAt && (record.expiresAt === undefined || Date.parse(record.expiresAt) > this.now())
  }

  private info(t: Record_): TokenInfo {
    const { salt: _salt, hash: _hash, ...info } = t
    return info
  }

  private fold(e: { type: string; data: unknown; at: string; meta: EventMeta }): void {
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
    } else if (e.type === 'token.revoked') {
      const { tokenId } = e.data as DataOf<'token.revoked'>
      const record = this.tokens.get(tokenId)
      if (record) this.tokens.set(tokenId, { ...record, revokedAt: e.at })
      for (const [digest, id] of this.verified) if (id === tokenId) this.verified.delete(digest)
      for (const listener of this.revokedListeners) listener(tokenId)
    }
  }
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
