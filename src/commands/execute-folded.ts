import type { ChronicleEvent } from '../events/catalogue.js'
import type { StoredEvent } from '../events/envelope.js'
import { ChronicleError } from '../events/errors.js'
import type { EventLog } from '../events/log.js'
import type { ExecuteOptions } from './execute.js'

/**
 * The command path (src/commands/execute.ts) for a system stream whose state
 * its owner keeps folded in memory rather than in a read model — the tokens
 * and shares of `sys_tokens` (src/http/principals.ts): decide on the state as
 * folded, append with the version it is folded to. A write in between
 * (another server on the same database) is a VERSION_CONFLICT: the stream's
 * newer events are read and folded, and the command decided again on them,
 * up to ATTEMPTS times (docs/ARCHITECTURE.md "The write path").
 */
export interface FoldedStream {
  /** the stream's version the state is folded to now */
  version(): number
  /** folds events of the stream in version order; those at or below `version` change nothing */
  fold(events: readonly StoredEvent[]): void
}

const ATTEMPTS = 3

export async function executeFolded(
  log: EventLog,
  streamId: string,
  state: FoldedStream,
  decide: () => readonly ChronicleEvent[],
  options: ExecuteOptions,
): Promise<StoredEvent[]> {
  for (let attempt = 1; ; attempt++) {
    const decided = decide()
    if (decided.length === 0) return []
    try {
      const stored = await log.append(streamId, decided, {
        expectedVersion: state.version(),
        meta: options.meta,
        ...(options.durability && { durability: options.durability }),
      })
      state.fold(stored) // heard as committed too (or not, on an engine that publishes later): folded once either way
      return stored
    } catch (err) {
      if (!(err instanceof ChronicleError && err.code === 'VERSION_CONFLICT') || attempt === ATTEMPTS) throw err
      state.fold(await log.readSession(streamId))
    }
  }
}
