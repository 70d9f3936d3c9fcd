import { createHash } from 'node:crypto'
import type { Changes } from '../../projections/fold/evolve.js'
import type { Message, Part, SessionView, ToolPart } from '../../projections/fold/model.js'
import { ACCEPTS_ALL, type Accepted } from '../model/adapter.js'
import { type ChatMessage, type ChatOptions, messageToChat, toChatMessages } from './chat-messages.js'

/**
 * The session's history as the model sees it, kept current change by change
 * (the same Changes evolve produced for the read model), so that a step costs
 * O(what changed) instead of O(history): each message's chat form and the
 * running digest are cached and recomputed only from the first message that
 * changed — in a live session, the last one or two. `toChatMessages` is the
 * reference: a transcript always yields exactly what it yields.
 */

interface Entry {
  message: Message
  readonly parts: Map<string, Part>
  /** cached: the message's chat messages, the call ids it added, the digest chain after it */
  chat?: ChatMessage[]
  calls?: string[]
  chain?: string
  /** the length of the flat chat list after this entry */
  end?: number
}

/** Digest chain over chat messages: sha256(previous ‖ JSON of the message). */
export function chainDigest(previous: string, message: ChatMessage): string {
  return createHash('sha256').update(previous).update('\n').update(JSON.stringify(message)).digest('hex')
}

export function chainOf(messages: readonly ChatMessage[]): string {
  let chain = ''
  for (const m of messages) chain = chainDigest(chain, m)
  return chain
}

export class Transcript {
  private readonly entries: Entry[] = []
  private readonly position = new Map<string, number>()
  /** entries before this position have valid caches */
  private valid = 0
  private readonly seenCalls = new Set<string>()
  private readonly flat: ChatMessage[] = []
  private compacted = false
  /** what the cached chat forms were converted for (a model that takes images gets them; another a note) */
  private accepts = ''

  /** `read`: a blob's content, for files read at submit */
  constructor(
    private readonly view: SessionView,
    private readonly read?: (hash: string) => string | undefined,
  ) {
    const byMessage = new Map<string, Part[]>()
    for (const p of view.parts.values()) {
      const list = byMessage.get(p.messageId)
      if (list) list.push(p)
      else byMessage.set(p.messageId, [p])
    }
    const messages = [...view.messages.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    for (const m of messages) {
      this.position.set(m.id, this.entries.length)
      this.entries.push({ message: m, parts: new Map((byMessage.get(m.id) ?? []).map((p) => [p.id, p])) })
    }
    // Any compaction (even a failed one) leaves summary messages only visibleMessages knows to hide.
    this.compacted = view.session?.compaction != null
  }

  /** Folds what one event changed (called after the view itself was updated). */
  apply(changes: Changes): void {
    if (changes.session) this.compacted = changes.session.compaction != null
    for (const m of changes.messages ?? []) {
      const at = this.position.get(m.id)
      if (at !== undefined) {
        ;(this.entries[at] as Entry).message = m
        this.invalidate(at)
      } else {
        this.insert({ message: m, parts: new Map() })
      }
    }
    for (const p of changes.parts ?? []) {
      const at = this.position.get(p.messageId)
      if (at === undefined) continue // a part of a message not yet seen cannot be sent to the model
      ;(this.entries[at] as Entry).parts.set(p.id, p)
      this.invalidate(at)
    }
  }

  /**
   * The chat messages for a model that takes `accepts`, and their digest chain (the reference conversion when
   * a compaction reshaped the history).
   */
  chat(accepts: readonly Accepted[] = ACCEPTS_ALL): { messages: ChatMessage[]; chain: string } {
    const options: ChatOptions = { accepts, ...(this.read && { read: this.read }) }
    if (this.compacted) {
      const messages = toChatMessages(this.view, options)
      return { messages, chain: chainOf(messages) }
    }
    const key = accepts.join(',')
    if (key !== this.accepts) {
      this.invalidate(0)
      this.accepts = key
    }
    // `flat` holds the chat messages of the valid entries: cut it back to the first stale one, then extend.
    const from = this.valid
    this.flat.length = from === 0 ? 0 : ((this.entries[from - 1] as Entry).end ?? 0)
    for (let i = from; i < this.entries.length; i++) {
      const entry = this.entries[i] as Entry
      const own = [...entry.parts.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      const { chat, calls } = messageToChat(entry.message, own, this.seenCalls, options)
      let chain = i === 0 ? '' : ((this.entries[i - 1] as Entry).chain ?? '')
      for (const m of chat) {
        chain = chainDigest(chain, m)
        this.flat.push(m)
      }
      Object.assign(entry, { chat, calls, chain, end: this.flat.length })
    }
    this.valid = this.entries.length
    return { messages: this.flat.slice(), chain: this.entries.at(-1)?.chain ?? '' }
  }

  latest(role: 'user' | 'assistant'): Message | undefined {
    for (let i = this.entries.length - 1; i >= 0; i--) {
      const m = (this.entries[i] as Entry).message
      if (m.role === role) return m
    }
    return undefined
  }

  partsOf(messageId: string): Part[] {
    const at = this.position.get(messageId)
    const parts = at === undefined ? [] : [...(this.entries[at] as Entry).parts.values()]
    return parts.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  }

  /** The last `count` tool parts created before part `beforeId`, oldest first. */
  toolPartsBefore(beforeId: string, count: number): ToolPart[] {
    const found: ToolPart[] = []
    const stop = Math.max(0, this.entries.length - 16) // "in a row" never reaches further back than the last few steps
    for (let i = this.entries.length - 1; i >= stop && found.length < count; i--) {
      const tools = this.partsOf((this.entries[i] as Entry).message.id).filter(
        (p): p is ToolPart => p.type === 'tool' && p.id < beforeId,
      )
      found.unshift(...tools.slice(-(count - found.length)))
    }
    return found
  }

  private insert(entry: Entry): void {
    const id = entry.message.id
    const last = this.entries.at(-1)
    if (!last || last.message.id < id) {
      this.position.set(id, this.entries.length)
      this.entries.push(entry)
      return
    }
    // Out of order (ids from another clock): insert sorted and renumber.
    let at = this.entries.findIndex((e) => e.message.id > id)
    if (at < 0) at = this.entries.length
    this.entries.splice(at, 0, entry)
    this.entries.forEach((e, i) => {
      this.position.set(e.message.id, i)
    })
    this.invalidate(at)
  }

  private invalidate(at: number): void {
    if (at >= this.valid) return
    for (let i = at; i < this.valid; i++)
      for (const c of (this.entries[i] as Entry).calls ?? []) this.seenCalls.delete(c)
    this.valid = at
  }
}
