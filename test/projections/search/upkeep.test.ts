import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { dumpIndex, rebuildIndex, verifyIndex } from '../../../src/projections/search/upkeep.js'
import {
  alice,
  assistant,
  created,
  input,
  model,
  type SearchFixture,
  searchFixture,
  streamed,
  toolCall,
} from './helpers.js'

/**
 * The search index's upkeep (docs/SEARCH.md): `rebuild` gives the same index
 * as the one built commit by commit; `verify` finds an index that disagrees
 * with the log, whatever was changed in it.
 */

let f: SearchFixture
const source = () => join(f.dir, 'chronicle.db')
beforeEach(() => {
  f = searchFixture()
  // built as the server builds it: a commit (or a few) at a time, the indexer restarted mid-part
  f.append('ses_1', [created('Auth work')], alice)
  f.append('ses_1', [input('in_1', [{ type: 'text', text: 'fix src/auth.ts' }])], alice)
  f.index()
  const answer = streamed('text', 'prt_t', ['looking ', 'at it'])
  f.append('ses_1', [assistant, ...answer.slice(0, 2)], model)
  f.index()
  f.restart()
  f.append('ses_1', answer.slice(2), model)
  f.append('ses_1', [toolCall('prt_c', 'bash', { command: 'npm test' })], model)
  f.index()
  f.append('ses_1', [{ type: 'tool.completed', data: { partId: 'prt_c', output: '3 passing' } }], { actor: 'tool' })
  f.append('ses_2', [{ type: 'session.forked', data: { from: { sessionId: 'ses_1', seq: 2 } } }])
  f.append('ses_1', [{ type: 'session.renamed', data: { title: 'Auth fixed' } }], alice)
  f.append('ses_2', [{ type: 'session.archived', data: {} }], alice)
  f.index()
  f.restart()
})
afterEach(() => f.close())

describe('rebuild', () => {
  it('gives an index identical to the one built commit by commit', () => {
    const built = new Database(f.indexPath, { readonly: true })
    const before = dumpIndex(built)
    built.close()
    const rebuiltPath = join(f.dir, 'rebuilt.db')
    const report = rebuildIndex(source(), rebuiltPath)
    expect(report).toMatchObject({ events: f.store.head(), documents: 4 })
    const rebuilt = new Database(rebuiltPath, { readonly: true })
    expect(dumpIndex(rebuilt)).toEqual(before)
    expect(rebuilt.prepare("SELECT value FROM index_meta WHERE key = 'position'").pluck().get()).toBe(f.store.head())
    rebuilt.close()
    // and in place: the file deleted and built again
    rebuildIndex(source(), f.indexPath)
    const again = new Database(f.indexPath, { readonly: true })
    expect(dumpIndex(again)).toEqual(before)
    again.close()
  })
})

describe('verify', () => {
  const differences = () => verifyIndex(source(), f.indexPath).differences
  const tamper = (sql: string) => {
    const db = new Database(f.indexPath)
    db.exec(sql)
    db.close()
  }

  it('an index that agrees with the log: no difference, and what it compared', () => {
    expect(verifyIndex(source(), f.indexPath)).toEqual({
      present: true,
      position: f.store.head(),
      head: f.store.head(),
      documents: 4,
      differences: [],
    })
  })

  it('a document whose text was changed', () => {
    tamper("UPDATE docs SET text = 'fix src/other.ts' WHERE key = 'in_1'")
    expect(differences()).toEqual([
      expect.stringMatching(/^document ses_1 in_1: the index holds .*src\/other\.ts.*, the log gives .*src\/auth\.ts/),
    ])
  })

  it('a document missing, one the log never made, a session’s title or archived flag changed', () => {
    tamper(`
      DELETE FROM docs WHERE key = 'prt_c';
      INSERT INTO docs (session, key, kind, seq, event, at, by, files, marks, text)
        VALUES (1, 'prt_x', 'text', 3, 'text.ended', 0, 'model', '', x'0300', 'made up');
      UPDATE sessions SET title = 'renamed by hand' WHERE session_id = 'ses_1';
      UPDATE sessions SET archived = 0 WHERE session_id = 'ses_2';
    `)
    expect(differences()).toEqual([
      expect.stringMatching(/^session ses_1: the index holds \["renamed by hand"/),
      expect.stringMatching(/^session ses_2: the index holds .*,0\], the log gives .*,1\]/),
      'document ses_1 prt_c: missing from the index',
      'document ses_1 prt_x: in the index, not in the log',
    ])
  })

  it('a full-text index that disagrees with its documents (FTS5’s own check)', () => {
    tamper("INSERT INTO docs_fts (rowid, text, files) VALUES (1, 'words no document has', '')")
    expect(differences()).toEqual([expect.stringMatching(/^the full-text index disagrees with its documents/)])
  })

  it('an index built from another log (its position’s hash is not the log’s) is named, not compared', () => {
    tamper("UPDATE index_meta SET value = 'FF' WHERE key = 'positionHash'")
    expect(verifyIndex(source(), f.indexPath)).toEqual({
      present: true,
      stale: true,
      position: f.store.head(),
      head: f.store.head(),
      documents: 4,
      differences: [],
    })
  })

  it('no index at all is not a difference: the server builds it when it starts', () => {
    rebuildIndex(source(), join(f.dir, 'other.db'))
    expect(verifyIndex(source(), join(f.dir, 'absent.db'))).toEqual({
      present: false,
      position: 0,
      head: f.store.head(),
      documents: 0,
      differences: [],
    })
  })
})
