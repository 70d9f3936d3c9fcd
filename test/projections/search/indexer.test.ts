import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  alice,
  assistant,
  created,
  input,
  model,
  runtime,
  type SearchFixture,
  searchFixture,
  streamed,
  toolCall,
} from './helpers.js'

/**
 * The search indexer, one spec per kind of document: given a session's
 * events (appended through a real store), when the indexer reads the log
 * (through its own connection, as the server's worker does), then the index
 * holds exactly these documents.
 */

let f: SearchFixture
beforeEach(() => {
  f = searchFixture()
})
afterEach(() => f.close())

describe('the indexer', () => {
  it('session.created with a title: a title document; without one, none', () => {
    f.append('ses_1', [created('Fix the flaky login test')], alice)
    f.append('ses_2', [created()], alice)
    f.index()
    expect(f.docs()).toEqual([
      {
        session: 'ses_1',
        key: 'title',
        kind: 'title',
        seq: 1,
        event: 'session.created',
        by: 'alice',
        tool: null,
        files: '',
        marks: [1, 0],
        text: 'Fix the flaky login test',
      },
    ])
  })

  it('session.renamed: the title document is replaced, at the rename', () => {
    f.append('ses_1', [created('first')], alice)
    f.append('ses_1', [{ type: 'session.renamed', data: { title: 'second' } }], alice)
    f.index()
    expect(f.docs().map((d) => [d.key, d.text, d.seq, d.event])).toEqual([['title', 'second', 2, 'session.renamed']])
  })

  it('input.accepted: the text parts and the attached files’ names, by whoever sent it', () => {
    f.append('ses_1', [created()])
    f.append(
      'ses_1',
      [
        input('in_1', [
          { type: 'text', text: 'why does src/auth.ts fail?' },
          { type: 'file', path: 'logs/test-run.txt' },
          { type: 'file', url: 'data:text/plain;base64,aGk=', filename: 'note.txt' },
        ]),
      ],
      alice,
    )
    f.index()
    expect(f.docs()).toEqual([
      {
        session: 'ses_1',
        key: 'in_1',
        kind: 'input',
        seq: 2,
        event: 'input.accepted',
        by: 'alice',
        tool: null,
        files: 'logs/test-run.txt\nnote.txt',
        marks: [2, 0],
        text: 'why does src/auth.ts fail?\nlogs/test-run.txt\nnote.txt',
      },
    ])
  })

  it('text: one document when the part ends, each delta’s seq marked at its offset; nothing while it streams', () => {
    f.append('ses_1', [created(), assistant])
    const [started, ...rest] = streamed('text', 'prt_t', ['The test ', 'is flaky ', 'on CI.'])
    f.append('ses_1', [started as never], model)
    for (const e of rest.slice(0, 3)) f.append('ses_1', [e], model)
    f.index()
    expect(f.docs()).toEqual([])
    f.append('ses_1', [rest[3] as never], model)
    f.index()
    expect(f.docs()).toEqual([
      {
        session: 'ses_1',
        key: 'prt_t',
        kind: 'text',
        seq: 7,
        event: 'text.ended',
        by: 'model',
        tool: null,
        files: '',
        marks: [4, 0, 5, 9, 6, 18],
        text: 'The test is flaky on CI.',
      },
    ])
  })

  it('reasoning: the same, as a reasoning document', () => {
    f.append('ses_1', [created(), assistant, ...streamed('reasoning', 'prt_r', ['think ', 'harder'])], model)
    f.index()
    expect(f.docs().map((d) => [d.kind, d.key, d.text, d.event])).toEqual([
      ['reasoning', 'prt_r', 'think harder', 'reasoning.ended'],
    ])
  })

  it('an empty text part is no document', () => {
    f.append('ses_1', [created(), assistant, ...streamed('text', 'prt_t', ['  '])], model)
    f.index()
    expect(f.docs()).toEqual([])
  })

  it('tool.called then tool.completed: the tool, its input’s strings and file arguments, then its output', () => {
    f.append('ses_1', [created(), assistant])
    f.append('ses_1', [toolCall('prt_c', 'bash', { command: 'rm -rf build', timeout: 5000 })], model)
    f.append(
      'ses_1',
      [toolCall('prt_e', 'edit', { filePath: '/work/src/auth.ts', oldString: 'a', newString: 'b' })],
      model,
    )
    f.index()
    expect(f.docs().map((d) => [d.key, d.tool, d.files, d.text, d.seq])).toEqual([
      ['prt_c', 'bash', '', 'bash\nrm -rf build\n5000', 3],
      ['prt_e', 'edit', '/work/src/auth.ts', 'edit\n/work/src/auth.ts\na\nb', 4],
    ])
    f.append(
      'ses_1',
      [{ type: 'tool.completed', data: { partId: 'prt_c', output: 'removed 12 files', title: 'rm' } }],
      {
        actor: 'tool',
      },
    )
    f.index()
    expect(f.docs()[0]).toEqual({
      session: 'ses_1',
      key: 'prt_c',
      kind: 'tool',
      seq: 5,
      event: 'tool.completed',
      by: 'model',
      tool: 'bash',
      files: '',
      marks: [3, 0, 5, 23],
      text: 'bash\nrm -rf build\n5000\nrm\nremoved 12 files',
    })
  })

  it('tool.failed: the error’s kind and message join the call’s document', () => {
    f.append('ses_1', [created(), assistant, toolCall('prt_c', 'read', { filePath: 'missing.ts' })], model)
    f.append('ses_1', [
      { type: 'tool.failed', data: { partId: 'prt_c', error: { kind: 'failed', message: 'ENOENT' } } },
    ])
    f.index()
    expect(f.docs().map((d) => [d.text, d.event, d.marks])).toEqual([
      ['read\nmissing.ts\nfailed: ENOENT', 'tool.failed', [3, 0, 4, 16]],
    ])
  })

  it('permission.requested then replied: the permission and patterns, then the reply, by who replied', () => {
    f.append('ses_1', [created()])
    f.append(
      'ses_1',
      [{ type: 'permission.requested', data: { requestId: 'per_1', permission: 'bash', patterns: ['git push'] } }],
      { actor: 'tool' },
    )
    f.index()
    expect(f.docs().map((d) => [d.kind, d.text, d.by])).toEqual([['permission', 'bash\ngit push', 'tool']])
    f.append(
      'ses_1',
      [{ type: 'permission.replied', data: { requestId: 'per_1', reply: 'always', message: 'fine, ship it' } }],
      alice,
    )
    f.index()
    expect(f.docs().map((d) => [d.kind, d.text, d.by, d.seq, d.event])).toEqual([
      ['permission', 'bash\ngit push\nalways\nfine, ship it', 'alice', 3, 'permission.replied'],
    ])
  })

  it('workspace.snapshotted with changes: the changed paths as a file document; none changed, none', () => {
    const tree = 'a'.repeat(40)
    f.append('ses_1', [created()])
    f.append('ses_1', [{ type: 'workspace.snapshotted', data: { tree, reason: 'step', changed: [] } }])
    f.append('ses_1', [
      {
        type: 'workspace.snapshotted',
        data: {
          tree,
          reason: 'tool',
          changed: [
            { path: 'src/auth.ts', status: 'modified', added: 1, removed: 1 },
            { path: 'old.txt', status: 'deleted' },
          ],
        },
      },
    ])
    f.index()
    expect(f.docs().map((d) => [d.kind, d.key, d.files, d.text])).toEqual([
      ['file', 'files@3', 'src/auth.ts\nold.txt', 'modified src/auth.ts\ndeleted old.txt'],
    ])
  })

  it('a sub-agent’s prompt is its child session’s input; the child is recorded under its parent', () => {
    f.append('ses_1', [created()])
    f.append('ses_2', [
      {
        type: 'session.created',
        data: { directory: '/work', agent: 'general', model: null, parent: { sessionId: 'ses_1', callId: 'c1' } },
      },
    ])
    f.append('ses_2', [input('in_sub', [{ type: 'text', text: 'find every caller of login()' }])], runtime)
    f.index()
    expect(f.docs().map((d) => [d.session, d.kind, d.by, d.text])).toEqual([
      ['ses_2', 'input', 'runtime', 'find every caller of login()'],
    ])
    expect(f.indexDb().prepare('SELECT session_id, up FROM sessions ORDER BY id').all()).toEqual([
      { session_id: 'ses_1', up: null },
      { session_id: 'ses_2', up: 1 },
    ])
  })

  it('a fork is its own session: its inherited history is found in the session it came from, once', () => {
    f.append('ses_1', [created('parent'), assistant, ...streamed('text', 'prt_t', ['half ', 'written'])], model)
    f.append('ses_f', [{ type: 'session.forked', data: { from: { sessionId: 'ses_1', seq: 4 } } }])
    // the fork settles the part it inherited mid-stream: the parent's part, not indexed again under the child
    f.append('ses_f', [{ type: 'text.ended', data: { partId: 'prt_t' } }])
    f.index()
    expect(f.docs().map((d) => [d.session, d.key, d.text])).toEqual([
      ['ses_1', 'title', 'parent'],
      ['ses_1', 'prt_t', 'half written'],
    ])
    expect(f.indexDb().prepare('SELECT session_id, title, up FROM sessions ORDER BY id').all()).toEqual([
      { session_id: 'ses_1', title: 'parent', up: null },
      { session_id: 'ses_f', title: 'parent (fork)', up: 1 },
    ])
  })

  it('system streams (tokens, MCP servers) are never indexed', () => {
    f.append(
      'sys_tokens',
      [
        {
          type: 'token.created',
          data: { tokenId: 'tok_1', name: 'ci-bot', role: 'audit', salt: 's', hash: 'h' },
        },
      ],
      { actor: 'system' },
    )
    f.index()
    expect(f.docs()).toEqual([])
    expect(f.indexDb().prepare('SELECT count(*) FROM sessions').pluck().get()).toBe(0)
  })

  it('a part streaming across a restart of the indexer is indexed whole: its start is read again', () => {
    f.append('ses_1', [created(), assistant], model)
    const events = streamed('text', 'prt_t', ['before ', 'the restart, ', 'and after'])
    f.append('ses_1', events.slice(0, 3), model)
    f.index() // a first indexer reads the part's start, then stops
    f.restart()
    f.append('ses_1', events.slice(3), model)
    f.index()
    expect(f.docs().map((d) => [d.text, d.marks])).toEqual([['before the restart, and after', [4, 0, 5, 7, 6, 20]]])
  })

  it('the index’s position is the last seq read, stored with the index', () => {
    f.append('ses_1', [created('x')])
    f.append('ses_1', [input('in_1', [{ type: 'text', text: 'hello' }])])
    expect(f.index()).toBe(2)
    expect(f.indexDb().prepare("SELECT value FROM index_meta WHERE key = 'position'").pluck().get()).toBe(2)
  })
})
