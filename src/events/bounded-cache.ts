/**
 * A cache bounded three ways: by entries, by (estimated) bytes, and by idle
 * time. Least recently used entries go first; an entry unused for `idleMs` is
 * dropped at the next touch of the cache, or by `sweep()`. What such a cache
 * holds must be rebuildable from the log: dropping an entry changes no
 * answer, only how fast the next one comes (docs/ARCHITECTURE.md "Memory").
 */

export interface CacheBounds {
  /** entries kept at most */
  readonly entries: number
  /** estimated bytes kept at most (an entry larger than this alone is not kept) */
  readonly bytes: number
  /** an entry unused this long is dropped */
  readonly idleMs: number
}

interface Slot<V> {
  value: V
  bytes: number
  used: number
}

export class BoundedCache<K, V> {
  /** least recently used first (a Map keeps insertion order; a touch re-inserts) */
  private readonly slots = new Map<K, Slot<V>>()
  private total = 0

  constructor(
    readonly bounds: CacheBounds,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.slots.size
  }

  /** the estimated bytes held */
  get bytes(): number {
    return this.total
  }

  /** The value, now the most recently used; undefined when absent (or idle too long). */
  get(key: K): V | undefined {
    const slot = this.slots.get(key)
    if (!slot) return undefined
    const now = this.now()
    if (now - slot.used >= this.bounds.idleMs) {
      this.delete(key)
      return undefined
    }
    slot.used = now
    this.slots.delete(key)
    this.slots.set(key, slot)
    return slot.value
  }

  /** The value, removed from the cache (undefined when absent, or idle too long): a get and a delete in one. */
  take(key: K): V | undefined {
    const slot = this.slots.get(key)
    if (!slot) return undefined
    this.delete(key)
    return this.now() - slot.used >= this.bounds.idleMs ? undefined : slot.value
  }

  /** The value without using it: neither its recency nor its idle time changes. */
  peek(key: K): V | undefined {
    return this.slots.get(key)?.value
  }

  has(key: K): boolean {
    return this.slots.has(key)
  }

  /** Keeps `value` (most recently used) at an estimated `bytes`, then evicts past the bounds. */
  set(key: K, value: V, bytes = 0): void {
    const prior = this.slots.get(key)
    if (prior) {
      this.total -= prior.bytes
      this.slots.delete(key)
    }
    const now = this.now()
    this.slots.set(key, { value, bytes, used: now })
    this.total += bytes
    this.evict(now)
  }

  /** Re-estimates an entry's bytes (it grew or shrank in place), then evicts past the bounds. */
  resize(key: K, bytes: number): void {
    const slot = this.slots.get(key)
    if (!slot) return
    this.total += bytes - slot.bytes
    slot.bytes = bytes
    this.evict()
  }

  delete(key: K): boolean {
    const slot = this.slots.get(key)
    if (!slot) return false
    this.total -= slot.bytes
    return this.slots.delete(key)
  }

  /** Drops every entry unused for idleMs (the least recently used come first, so it stops at the first in use). */
  sweep(now = this.now()): void {
    const limit = now - this.bounds.idleMs
    for (const [key, slot] of this.slots) {
      if (slot.used > limit) break
      this.delete(key)
    }
  }

  clear(): void {
    this.slots.clear()
    this.total = 0
  }

  keys(): IterableIterator<K> {
    return this.slots.keys()
  }

  private evict(now = this.now()): void {
    this.sweep(now)
    for (const key of this.slots.keys()) {
      if (this.slots.size <= this.bounds.entries && this.total <= this.bounds.bytes) break
      this.delete(key)
    }
  }
}
