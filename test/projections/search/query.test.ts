import { describe, expect, it } from 'vitest'
import { ChronicleError } from '../../../src/events/errors.js'
import { parseQuery } from '../../../src/projections/search/query.js'

/** The query language (docs/SEARCH.md "Queries"): given a query, then exactly this parse, or BAD_QUERY at this offset. */

const NOW = Date.UTC(2026, 11, 10, 12, 0, 0)
const none = { any: [], none: [] }
const empty = { terms: [], excluded: [], session: none, tool: none, by: none, type: none, file: none }

function badAt(query: string): { message: string; position: number } {
  try {
    parseQuery(query, NOW)
  } catch (err) {
    expect(err).toBeInstanceOf(ChronicleError)
    const e = err as ChronicleError
    expect(e.code).toBe('BAD_QUERY')
    expect(e.status).toBe(400)
    return { message: e.message, position: e.details?.position as number }
  }
  throw new Error(`${query} parsed`)
}

describe('the query parser', () => {
  it('words: every one must match, lower-cased', () => {
    expect(parseQuery('Flaky  test', NOW)).toEqual({
      ...empty,
      terms: [
        { words: ['flaky'], prefix: false },
        { words: ['test'], prefix: false },
      ],
    })
  })

  it('"a phrase": its words in order; with punctuation, also as typed', () => {
    expect(parseQuery('"flaky on CI" "rm -rf build"', NOW).terms).toEqual([
      { words: ['flaky', 'on', 'ci'], prefix: false },
      { words: ['rm', 'rf', 'build'], prefix: false, literal: 'rm -rf build' },
    ])
  })

  it('code as typed: a path, a snake_case name and a flag are each one term, matched as typed', () => {
    expect(parseQuery('src/auth.ts snake_case_name --force', NOW).terms).toEqual([
      { words: ['src', 'auth', 'ts'], prefix: false, literal: 'src/auth.ts' },
      { words: ['snake', 'case', 'name'], prefix: false, literal: 'snake_case_name' },
      { words: ['force'], prefix: false, literal: '--force' },
    ])
  })

  it('prefix*: the last word a prefix', () => {
    expect(parseQuery('auth* src/au*', NOW).terms).toEqual([
      { words: ['auth'], prefix: true },
      { words: ['src', 'au'], prefix: true, literal: 'src/au' },
    ])
  })

  it('-excluded: terms and filters', () => {
    expect(parseQuery('deploy -staging -tool:bash -type:reasoning', NOW)).toEqual({
      ...empty,
      terms: [{ words: ['deploy'], prefix: false }],
      excluded: [{ words: ['staging'], prefix: false }],
      tool: { any: [], none: ['bash'] },
      type: { any: [], none: ['reasoning'] },
    })
  })

  it('every filter: session, tool, by, type, file, after, before (a date, a time, an age)', () => {
    expect(
      parseQuery(
        'session:ses_1 tool:bash by:alice type:permission file:src/x.ts after:2026-12-01 before:2026-12-05T10:00:00Z',
        NOW,
      ),
    ).toEqual({
      ...empty,
      session: { any: ['ses_1'], none: [] },
      tool: { any: ['bash'], none: [] },
      by: { any: ['alice'], none: [] },
      type: { any: ['permission'], none: [] },
      file: { any: ['src/x.ts'], none: [] },
      after: Date.UTC(2026, 11, 1),
      before: Date.UTC(2026, 11, 5, 10),
    })
    expect(parseQuery('type:tool after:7d', NOW).after).toBe(NOW - 7 * 86_400_000)
    expect(parseQuery('type:tool after:12h before:30m', NOW)).toMatchObject({
      after: NOW - 12 * 3_600_000,
      before: NOW - 30 * 60_000,
    })
  })

  it('a filter repeated is any of them; a filter value may be quoted', () => {
    expect(parseQuery('type:text type:reasoning by:"alice smith"', NOW)).toMatchObject({
      type: { any: ['text', 'reasoning'], none: [] },
      by: { any: ['alice smith'], none: [] },
    })
  })

  it('a word with a colon that names no filter is a word (a URL)', () => {
    expect(parseQuery('http://localhost:4780', NOW).terms).toEqual([
      { words: ['http', 'localhost', '4780'], prefix: false, literal: 'http://localhost:4780' },
    ])
  })

  it('a filter alone is a query', () => {
    expect(parseQuery('tool:bash', NOW)).toEqual({ ...empty, tool: { any: ['bash'], none: [] } })
  })

  it.each([
    ['', 0, 'an empty query'],
    ['   ', 0, 'an empty query'],
    ['"never closed', 0, 'never closed'],
    ['flaky "never closed', 6, 'never closed'],
    ['fix ""', 4, 'an empty phrase'],
    ['fix - build', 4, 'a lone "-"'],
    ['tool: bash', 0, 'tool: needs a value'],
    ['x type:everything', 2, 'type: is one of input, text, reasoning, tool, permission, file, title'],
    ['x after:yesterday', 2, 'after: takes a date'],
    ['x before:2026-13-45', 2, 'before: takes a date'],
    ['x -after:7d', 2, '-after: is not a filter'],
    ['x after:2026-12-05 before:2026-12-01', 0, 'after: is not before before:'],
    ['au*th', 2, '"*" marks a prefix'],
    ['*', 0, 'nothing to search for'],
    ['fix !!!', 4, 'nothing to search for'],
    ['-flaky', 0, 'nothing to exclude from'],
    ['-tool:bash', 0, 'nothing to exclude from'],
    ['ab"cd"', 2, 'a quote inside a word'],
    ['file:*', 0, 'file: needs a path'],
  ])('BAD_QUERY for %j at offset %i: %s', (query, position, message) => {
    const bad = badAt(query)
    expect(bad.position).toBe(position)
    expect(bad.message).toContain(message)
    expect(bad.message).toContain(`(at character ${position + 1})`)
  })

  it('BAD_QUERY for a query over 1000 characters', () => {
    expect(badAt('x'.repeat(1001)).message).toContain('at most 1000 characters')
  })
})
