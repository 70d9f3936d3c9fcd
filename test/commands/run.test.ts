import { describe, it } from 'vitest'
import { decideCancel } from '../../src/commands/run.js'
import { given } from './given.js'
import {
  accepted,
  archived,
  cancelRequested,
  created,
  delivered,
  imported,
  runFinished,
  runStarted,
} from './history.js'

/**
 * Cancelling a run: the request is a durable fact (`run.cancel.requested`),
 * so a cancelled run is never resumed after a restart. Cancelling an idle
 * session, or a run already being cancelled, decides nothing.
 */

const running = [created, accepted('in_1'), delivered('in_1', 'msg_1', 'prt_1'), runStarted('run_1')]

describe('decideCancel', () => {
  it('a running run: its cancellation is requested', () => {
    given(...running)
      .when((s) => decideCancel(s, 'ses_1'))
      .then([{ type: 'run.cancel.requested', data: { runId: 'run_1' } }])
  })

  it('a run resumed after a restart is cancelled by its own id', () => {
    given(...running, { type: 'run.resumed', data: { runId: 'run_1', attempt: 1 } })
      .when((s) => decideCancel(s, 'ses_1'))
      .then([{ type: 'run.cancel.requested', data: { runId: 'run_1' } }])
  })

  it('a session that never ran: nothing to cancel', () => {
    given(created)
      .when((s) => decideCancel(s, 'ses_1'))
      .then([])
  })

  it('queued input but no run yet: nothing to cancel (the inbox is left alone)', () => {
    given(created, accepted('in_1'))
      .when((s) => decideCancel(s, 'ses_1'))
      .then([])
  })

  it('a finished run: nothing to cancel', () => {
    given(...running, runFinished('run_1'))
      .when((s) => decideCancel(s, 'ses_1'))
      .then([])
  })

  it('a cancellation already requested is not requested twice', () => {
    given(...running, cancelRequested('run_1'))
      .when((s) => decideCancel(s, 'ses_1'))
      .then([])
  })

  it('a cancellation requested before a restart still holds for the resumed run', () => {
    given(...running, cancelRequested('run_1'), { type: 'run.resumed', data: { runId: 'run_1', attempt: 1 } })
      .when((s) => decideCancel(s, 'ses_1'))
      .then([])
  })

  it('the run of an archived session can still be cancelled', () => {
    given(...running, archived)
      .when((s) => decideCancel(s, 'ses_1'))
      .then([{ type: 'run.cancel.requested', data: { runId: 'run_1' } }])
  })

  it('refuses an unknown session: SESSION_NOT_FOUND', () => {
    given()
      .when((s) => decideCancel(s, 'ses_9'))
      .thenFails('SESSION_NOT_FOUND', 'no session ses_9')
  })

  it('refuses an imported session, even one whose history left a run open: SESSION_READ_ONLY', () => {
    given(...running, imported)
      .when((s) => decideCancel(s, 'ses_1'))
      .thenFails('SESSION_READ_ONLY')
    given(created, imported)
      .when((s) => decideCancel(s, 'ses_1'))
      .thenFails('SESSION_READ_ONLY')
  })
})
