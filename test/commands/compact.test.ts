import { beforeEach, describe, it } from 'vitest'
import { decideCompact } from '../../src/commands/compact.js'
import { type IdSource, sequentialIds } from '../../src/events/ids.js'
import { given } from './given.js'
import {
  archived,
  assistant,
  compactionCompleted,
  compactionFailed,
  compactionRequested,
  compactionStarted,
  created,
  imported,
  runStarted,
} from './history.js'

/**
 * Manual compaction ("compact now"): a durable `compaction.requested
 * {reason: 'manual'}` that the runtime performs at the next step boundary.
 * A compaction already requested or running is not requested twice.
 *
 * `requestCompaction` (which reads and appends through the store) is not
 * specified here; its decision is `decideCompact`.
 */

let ids: IdSource
beforeEach(() => {
  ids = sequentialIds()
})

describe('decideCompact', () => {
  it('an idle session: a manual compaction is requested with the next id', () => {
    given(created)
      .when((s) => decideCompact(s, 'ses_1', ids.next('cmp')))
      .then([{ type: 'compaction.requested', data: { compactionId: 'cmp_000001', reason: 'manual' } }])
  })

  it('a running session: requested all the same (the runtime performs it at the next step boundary)', () => {
    given(created, runStarted('run_1'), assistant('msg_1'))
      .when((s) => decideCompact(s, 'ses_1', ids.next('cmp')))
      .then([{ type: 'compaction.requested', data: { compactionId: 'cmp_000001', reason: 'manual' } }])
  })

  it('while one is requested (for any reason): a duplicate, nothing decided', () => {
    given(created, compactionRequested('cmp_a', 'auto'))
      .when((s) => decideCompact(s, 'ses_1', ids.next('cmp')))
      .then([])
    given(created, compactionRequested('cmp_a', 'manual'))
      .when((s) => decideCompact(s, 'ses_1', ids.next('cmp')))
      .then([])
  })

  it('while one is running: a duplicate, nothing decided', () => {
    given(created, compactionRequested('cmp_a', 'overflow'), compactionStarted('cmp_a'))
      .when((s) => decideCompact(s, 'ses_1', ids.next('cmp')))
      .then([])
  })

  it('after one completed: a new one is requested', () => {
    given(
      created,
      assistant('msg_1'),
      compactionRequested('cmp_a'),
      compactionStarted('cmp_a'),
      compactionCompleted('cmp_a', 'msg_1'),
    )
      .when((s) => decideCompact(s, 'ses_1', ids.next('cmp')))
      .then([{ type: 'compaction.requested', data: { compactionId: 'cmp_000001', reason: 'manual' } }])
  })

  it('after one failed: a new one is requested', () => {
    given(created, compactionRequested('cmp_a'), compactionStarted('cmp_a'), compactionFailed('cmp_a'))
      .when((s) => decideCompact(s, 'ses_1', ids.next('cmp')))
      .then([{ type: 'compaction.requested', data: { compactionId: 'cmp_000001', reason: 'manual' } }])
  })

  it('refuses an unknown session: SESSION_NOT_FOUND', () => {
    given()
      .when((s) => decideCompact(s, 'ses_9', ids.next('cmp')))
      .thenFails('SESSION_NOT_FOUND', 'no session ses_9')
  })

  it('refuses an archived session: SESSION_ARCHIVED', () => {
    given(created, archived)
      .when((s) => decideCompact(s, 'ses_1', ids.next('cmp')))
      .thenFails('SESSION_ARCHIVED', 'session ses_1 is archived')
  })

  it('refuses an imported session, archived or not: SESSION_READ_ONLY', () => {
    given(created, imported)
      .when((s) => decideCompact(s, 'ses_1', ids.next('cmp')))
      .thenFails('SESSION_READ_ONLY')
    given(created, imported, archived)
      .when((s) => decideCompact(s, 'ses_1', ids.next('cmp')))
      .thenFails('SESSION_READ_ONLY')
  })

  it('an imported session with a compaction in flight is refused, not a duplicate', () => {
    given(created, compactionRequested('cmp_a'), imported)
      .when((s) => decideCompact(s, 'ses_1', ids.next('cmp')))
      .thenFails('SESSION_READ_ONLY')
  })
})
