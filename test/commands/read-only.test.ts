import { describe, expect, it } from 'vitest'
import { decideFork } from '../../src/commands/fork.js'
import { assertWritable } from '../../src/commands/read-only.js'
import type { Session } from '../../src/projections/fold/model.js'
import { given, viewOf } from './given.js'
import { archived, created, imported } from './history.js'

/**
 * An imported session is history to read, replay and fork, never to act on:
 * every command that would append to it is refused with SESSION_READ_ONLY.
 */

const writable = (session: Session | undefined): string => {
  if (!session) throw new Error('the given history has no session')
  assertWritable(session)
  return 'writable'
}

describe('assertWritable', () => {
  it('a session created here is writable, archived or not', () => {
    given(created).when(writable).then('writable')
    given(created, archived).when(writable).then('writable')
  })

  it('an imported session is SESSION_READ_ONLY, naming its original id and the way on (fork it into a directory)', () => {
    const error = given(created, imported)
      .when(writable)
      .thenFails(
        'SESSION_READ_ONLY',
        /^session ses_1 was imported \(as ses_orig\) and is read-only: fork it into a directory of your choice/,
      )
    expect(error.details).toEqual({ sessionId: 'ses_1', originalId: 'ses_orig' })
  })

  it('a fork of an imported session is writable', () => {
    const history = [created, imported]
    const fork = decideFork(
      viewOf(...history),
      { sessionId: 'ses_1', seq: 2 },
      { directory: '/mine', fromImport: true },
    )
    given(...history, ...fork)
      .when(writable)
      .then('writable')
  })
})
