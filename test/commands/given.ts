import { expect } from 'vitest'
import { ChronicleEvent, CURRENT_SCHEMA_VERSION } from '../../src/events/catalogue.js'
import type { StoredEvent } from '../../src/events/envelope.js'
import { ChronicleError, type ErrorCode } from '../../src/events/errors.js'
import { fold } from '../../src/projections/fold/fold.js'
import { emptyView, type Session, type SessionView } from '../../src/projections/fold/model.js'

/**
 * Decider specs: `given(history…).when(decide).then(events)`.
 *
 * `given` folds a history of session `ses_1` through the real `evolve` (the
 * store's envelope made deterministic: seq = version = position, one second
 * apart from T0) into the state a decider reads — the `Session` (undefined
 * when the history is empty) with `given`, the whole `SessionView` with
 * `givenView`. `then` asserts the whole decision with `toEqual`, and that
 * every decided event is valid by the catalogue (as the store checks on
 * append); `thenFails` asserts the stable error code and returns the error.
 */

export const SESSION_ID = 'ses_1'
export const T0 = Date.UTC(2026, 0, 1, 12, 0, 0)
export const at = (seq: number): string => new Date(T0 + (seq - 1) * 1000).toISOString()

/** The session's history as the store would hand it back: seq and version 1…n. */
export function stored(events: readonly ChronicleEvent[]): StoredEvent[] {
  return events.map((event, i) => ({
    ...event,
    seq: i + 1,
    version: i + 1,
    sessionId: SESSION_ID,
    schemaVersion: CURRENT_SCHEMA_VERSION,
    meta: { actor: 'user' as const },
    at: at(i + 1),
  }))
}

/** The view of session `ses_1` after `events` (an empty view for no events). */
export function viewOf(...events: ChronicleEvent[]): SessionView {
  return fold(emptyView(), stored(events))
}

export interface When<R> {
  /** the decision is exactly `expected` */
  then(expected: R): void
  /** the decider refuses with `code` (and a message matching `message`); returns the error for its details */
  thenFails(code: ErrorCode, message?: RegExp | string): ChronicleError
}

export interface Given<S> {
  readonly state: S
  when<R>(decide: (state: S) => R): When<R>
}

export function given(...events: ChronicleEvent[]): Given<Session | undefined> {
  return givenState(viewOf(...events).session ?? undefined)
}

export function givenView(...events: ChronicleEvent[]): Given<SessionView> {
  return givenState(viewOf(...events))
}

function givenState<S>(state: S): Given<S> {
  return {
    state,
    when: (decide) => ({
      then(expected) {
        const decided = decide(state)
        expect(decided).toEqual(expected)
        if (Array.isArray(decided)) for (const event of decided) ChronicleEvent.parse(event)
      },
      thenFails: (code, message) => expectFailure(() => decide(state), code, message),
    }),
  }
}

/** `run` throws a ChronicleError with `code` (and a message matching `message`); returns it. */
export function expectFailure(run: () => unknown, code: ErrorCode, message?: RegExp | string): ChronicleError {
  let thrown: unknown
  try {
    run()
  } catch (err) {
    thrown = err
  }
  expect(thrown, `expected ${code}, but nothing was thrown`).toBeInstanceOf(ChronicleError)
  const error = thrown instanceof ChronicleError ? thrown : new ChronicleError('INTERNAL', String(thrown))
  expect(error.code).toBe(code)
  if (message !== undefined) expect(error.message).toMatch(message)
  return error
}
