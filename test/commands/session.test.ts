import { describe, it } from 'vitest'
import { decideSession, type SessionCommand } from '../../src/commands/session.js'
import { given } from './given.js'
import { archived, created, imported } from './history.js'

/** The session lifecycle: create, rename, archive and unarchive, set the permission rules. */

const rules = [{ permission: 'bash', pattern: 'git *', action: 'allow' as const }]

describe('decideSession: create', () => {
  it('a new session with its directory, agent and model', () => {
    given()
      .when((s) =>
        decideSession({ type: 'create', directory: '/repo', agent: 'build', model: 'openai:gpt-5' }, s, 'ses_1'),
      )
      .then([{ type: 'session.created', data: { directory: '/repo', agent: 'build', model: 'openai:gpt-5' } }])
  })

  it('with no model: the default model is resolved at run time', () => {
    given()
      .when((s) => decideSession({ type: 'create', directory: '/repo', agent: 'build', model: null }, s, 'ses_1'))
      .then([{ type: 'session.created', data: { directory: '/repo', agent: 'build', model: null } }])
  })

  it('a sub-agent’s child session: with its title, parent call and rules', () => {
    const command: SessionCommand = {
      type: 'create',
      directory: '/repo',
      agent: 'explore',
      model: 'openai:gpt-5-mini',
      title: 'Find the tests',
      parent: { sessionId: 'ses_0', callId: 'call_1', agent: 'build' },
      rules,
    }
    given()
      .when((s) => decideSession(command, s, 'ses_1'))
      .then([
        {
          type: 'session.created',
          data: {
            directory: '/repo',
            agent: 'explore',
            model: 'openai:gpt-5-mini',
            title: 'Find the tests',
            parent: { sessionId: 'ses_0', callId: 'call_1', agent: 'build' },
            rules,
          },
        },
      ])
  })

  it('an empty title is left out (the session gets the default title)', () => {
    given()
      .when((s) =>
        decideSession({ type: 'create', directory: '/repo', agent: 'build', model: null, title: '' }, s, 'ses_1'),
      )
      .then([{ type: 'session.created', data: { directory: '/repo', agent: 'build', model: null } }])
  })

  it('refuses an id that already has a session: a second session.created would reset it when folded', () => {
    given(created)
      .when((s) => decideSession({ type: 'create', directory: '/repo', agent: 'build', model: null }, s, 'ses_1'))
      .thenFails('VERSION_CONFLICT', 'session ses_1 already exists')
  })
})

describe('decideSession: rename', () => {
  it('renames the session', () => {
    given(created)
      .when((s) => decideSession({ type: 'rename', title: 'Fix the parser' }, s, 'ses_1'))
      .then([{ type: 'session.renamed', data: { title: 'Fix the parser' } }])
  })

  it('an archived session can be renamed', () => {
    given(created, archived)
      .when((s) => decideSession({ type: 'rename', title: 'Old work' }, s, 'ses_1'))
      .then([{ type: 'session.renamed', data: { title: 'Old work' } }])
  })

  it('refuses an unknown session: SESSION_NOT_FOUND', () => {
    given()
      .when((s) => decideSession({ type: 'rename', title: 'x' }, s, 'ses_9'))
      .thenFails('SESSION_NOT_FOUND', 'no session ses_9')
  })

  it('refuses an imported session: SESSION_READ_ONLY', () => {
    given(created, imported)
      .when((s) => decideSession({ type: 'rename', title: 'x' }, s, 'ses_1'))
      .thenFails('SESSION_READ_ONLY')
  })
})

describe('decideSession: archive', () => {
  it('archives the session', () => {
    given(created)
      .when((s) => decideSession({ type: 'archive' }, s, 'ses_1'))
      .then([{ type: 'session.archived', data: {} }])
  })

  it('an archived session is not archived twice', () => {
    given(created, archived)
      .when((s) => decideSession({ type: 'archive' }, s, 'ses_1'))
      .then([])
  })

  it('an imported session can be archived (it only hides it from the listing)', () => {
    given(created, imported)
      .when((s) => decideSession({ type: 'archive' }, s, 'ses_1'))
      .then([{ type: 'session.archived', data: {} }])
  })

  it('refuses an unknown session: SESSION_NOT_FOUND', () => {
    given()
      .when((s) => decideSession({ type: 'archive' }, s, 'ses_9'))
      .thenFails('SESSION_NOT_FOUND', 'no session ses_9')
  })
})

describe('decideSession: unarchive', () => {
  it('brings an archived session back', () => {
    given(created, archived)
      .when((s) => decideSession({ type: 'unarchive' }, s, 'ses_1'))
      .then([{ type: 'session.unarchived', data: {} }])
  })

  it('a session that is not archived is left as it is', () => {
    given(created)
      .when((s) => decideSession({ type: 'unarchive' }, s, 'ses_1'))
      .then([])
  })

  it('refuses an unknown session: SESSION_NOT_FOUND', () => {
    given()
      .when((s) => decideSession({ type: 'unarchive' }, s, 'ses_9'))
      .thenFails('SESSION_NOT_FOUND', 'no session ses_9')
  })
})

describe('decideSession: set-rules', () => {
  it('replaces the configured rules', () => {
    given(created)
      .when((s) => decideSession({ type: 'set-rules', rules }, s, 'ses_1'))
      .then([{ type: 'session.rules.changed', data: { rules } }])
  })

  it('no rules at all is a change too', () => {
    given({ type: 'session.created', data: { directory: '/repo', agent: 'build', model: null, rules } })
      .when((s) => decideSession({ type: 'set-rules', rules: [] }, s, 'ses_1'))
      .then([{ type: 'session.rules.changed', data: { rules: [] } }])
  })

  it('refuses an unknown session: SESSION_NOT_FOUND', () => {
    given()
      .when((s) => decideSession({ type: 'set-rules', rules }, s, 'ses_9'))
      .thenFails('SESSION_NOT_FOUND')
  })

  it('refuses an imported session: SESSION_READ_ONLY', () => {
    given(created, imported)
      .when((s) => decideSession({ type: 'set-rules', rules }, s, 'ses_1'))
      .thenFails('SESSION_READ_ONLY')
  })
})

describe('decideSession: anything else', () => {
  it('an unknown command is BAD_REQUEST', () => {
    const unknown: SessionCommand = JSON.parse('{"type":"delete"}')
    given(created)
      .when((s) => decideSession(unknown, s, 'ses_1'))
      .thenFails('BAD_REQUEST', 'unknown session command {"type":"delete"}')
  })
})
