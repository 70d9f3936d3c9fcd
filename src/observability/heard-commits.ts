import type { StoredEvent } from '../events/envelope.js'

/**
 * Commits as a listener hears them, read a little later and together
 * (docs/OBSERVABILITY.md "Cost"). Metrics and spans are made from every
 * commit; made one commit at a time, between a run's other work, the same
 * code costs several times the CPU it costs run over a batch. So a commit
 * is only noted when it lands, with what must be read then (its time, the
 * write's duration), and read with the others after `delayMs` or when
 * someone needs what they tell (a scrape, a log line).
 */

export interface HeardCommit {
  readonly events: readonly StoredEvent[]
  /** when it was heard, ms since the epoch */
  readonly at: number
  /** its write transaction, in ms, as the log said while publishing it; negative when not known */
  readonly commitMs: number
}

/** long enough to gather a few commits, short beside a scrape interval or the spans' 5 s export */
export const READ_DELAY_MS = 200

export class HeardCommits {
  private heard: HeardCommit[] = []
  private timer: NodeJS.Timeout | undefined

  constructor(
    private readonly read: (commit: HeardCommit) => void,
    private readonly delayMs = READ_DELAY_MS,
  ) {}

  note(commit: HeardCommit): void {
    this.heard.push(commit)
    this.timer ??= setTimeout(this.flush, this.delayMs).unref()
  }

  /** Reads every commit heard so far, in the order heard. */
  readonly flush = (): void => {
    clearTimeout(this.timer)
    this.timer = undefined
    const heard = this.heard
    this.heard = []
    for (const commit of heard) this.read(commit)
  }
}
