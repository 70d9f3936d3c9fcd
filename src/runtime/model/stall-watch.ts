/**
 * A model stream that goes silent: its signal aborts once `touch` has not
 * been called for `ms` (and whenever the outer signal aborts). One timer per
 * `ms` of silence, not one per chunk — a touch only notes the time, so a
 * streamed delta costs a clock read.
 */
export class StallWatch {
  private readonly controller = new AbortController()
  private last = performance.now()
  private timer: NodeJS.Timeout
  /** the signal aborted because the stream went silent, not because the outer one did */
  stalled = false

  constructor(
    readonly ms: number,
    private readonly outer: AbortSignal,
  ) {
    if (outer.aborted) this.controller.abort(outer.reason)
    outer.addEventListener('abort', this.forward, { once: true })
    this.timer = setTimeout(this.check, ms)
  }

  /** aborted by the outer signal or by silence */
  get signal(): AbortSignal {
    return this.controller.signal
  }

  /** the stream said something */
  touch(): void {
    this.last = performance.now()
  }

  close(): void {
    clearTimeout(this.timer)
    this.outer.removeEventListener('abort', this.forward)
  }

  private readonly forward = () => this.controller.abort(this.outer.reason)

  private readonly check = () => {
    const silent = performance.now() - this.last
    if (silent < this.ms) {
      this.timer = setTimeout(this.check, this.ms - silent)
      return
    }
    this.stalled = true
    this.controller.abort(new Error(`the model sent nothing for ${this.ms} ms`))
  }
}
