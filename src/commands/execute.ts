import type { ChronicleEvent } from '../events/catalogue.js'
import type { EventMeta, StoredEvent } from '../events/envelope.js'
import type { Durability, EventStore } from '../events/store.js'
import type { Session } from '../projections/fold/model.js'
import { getSession } from '../projections/queries/read-model.js'

/**
 * The one command path (docs/ARCHITECTURE.md): read the stream's state once,
 * decide purely, append the decided events with the version that was read.
 * A concurrent write in between is a VERSION_CONFLICT, never a lost update.
 * Every client command and every runtime decision that appends goes through
 * here; only the model's streamed output and what the run records beside it
 * (runtime/loop/recorder.ts; the workspace snapshots, runtime/workspace/snapshots.ts),
 * recovery's settlement (runtime/recovery/) and an import (projections/transfer/export.ts)
 * append on their own.
 */
export type Decide = (session: Session | undefined) => readonly ChronicleEvent[]

export interface ExecuteOptions {
  readonly meta: EventMeta
  readonly durability?: Durability
  /** the decided events refer to no other session's queued appends (AppendOptions.alone) */
  readonly alone?: boolean
}

export interface Executed {
  /** what was appended (nothing, when the decider decided so) */
  readonly events: StoredEvent[]
  /** the state the decision was made on */
  readonly state: Session | undefined
}

export function execute(store: EventStore, sessionId: string, decide: Decide, options: ExecuteOptions): Executed {
  const state = getSession(store, sessionId)
  const decided = decide(state)
  if (decided.length === 0) return { events: [], state }
  const events = store.append(sessionId, decided, {
    expectedVersion: state?.version ?? 0,
    meta: options.meta,
    ...(options.durability && { durability: options.durability }),
    ...(options.alone && { alone: true }),
  })
  return { events, state }
}
