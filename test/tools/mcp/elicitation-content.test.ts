import { describe, expect, it } from 'vitest'
import {
  applyElicitationDefaults,
  type ElicitationSchema,
  validateElicitationContent,
} from '../../../src/tools/mcp/elicitation-content.js'

/** The form the conformance suite's SEP-1034 scenario asks with, plus the other primitive kinds. */
const form: ElicitationSchema = {
  type: 'object',
  properties: {
    name: { type: 'string', default: 'John Doe', minLength: 2, maxLength: 20 },
    age: { type: 'integer', default: 30, minimum: 0, maximum: 150 },
    score: { type: 'number', default: 95.5 },
    status: { type: 'string', enum: ['active', 'inactive', 'pending'], default: 'active' },
    verified: { type: 'boolean', default: true },
    email: { type: 'string', format: 'email' },
    homepage: { type: 'string', format: 'uri' },
    born: { type: 'string', format: 'date' },
    seen: { type: 'string', format: 'date-time' },
    plan: {
      type: 'string',
      oneOf: [
        { const: 'free', title: 'Free' },
        { const: 'pro', title: 'Pro' },
      ],
    },
    tags: { type: 'array', items: { type: 'string', enum: ['a', 'b', 'c'] }, minItems: 1, maxItems: 2, default: ['a'] },
  },
  required: ['name', 'email'],
}

describe('applyElicitationDefaults', () => {
  it('fills every property the answer leaves out with its default, and only those', () => {
    expect(applyElicitationDefaults(form, { email: 'a@b.co' })).toEqual({
      name: 'John Doe',
      age: 30,
      score: 95.5,
      status: 'active',
      verified: true,
      email: 'a@b.co',
      tags: ['a'],
    })
  })

  it('keeps what the user gave, including false and 0, over the defaults', () => {
    expect(applyElicitationDefaults(form, { verified: false, age: 0, name: 'Al' })).toMatchObject({
      verified: false,
      age: 0,
      name: 'Al',
    })
  })

  it('changes neither the content nor the schema it was given', () => {
    const content = { email: 'a@b.co' }
    const result = applyElicitationDefaults(form, content)
    ;(result.tags as string[]).push('b')
    expect(content).toEqual({ email: 'a@b.co' })
    expect(form.properties.tags?.default).toEqual(['a'])
  })

  it('a hostile schema with a __proto__ property gets a plain field, not a new prototype', () => {
    const hostile = JSON.parse(
      '{"type":"object","properties":{"__proto__":{"type":"string","default":"x"}}}',
    ) as ElicitationSchema
    const result = applyElicitationDefaults(hostile, {})
    expect(Object.getPrototypeOf(result)).toBe(Object.prototype)
    expect(Object.keys(result)).toEqual(['__proto__'])
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })
})

describe('validateElicitationContent', () => {
  const valid = { name: 'Ada', email: 'ada@example.com' }
  const check = (content: Record<string, unknown>) => validateElicitationContent(form, { ...valid, ...content })

  it('accepts content that fits the form', () => {
    const content = {
      ...valid,
      age: 36,
      score: 1.5,
      status: 'pending',
      verified: false,
      homepage: 'https://ada.example.com/',
      born: '1815-12-10',
      seen: '2026-12-02T03:00:00Z',
      plan: 'pro',
      tags: ['a', 'c'],
    }
    expect(validateElicitationContent(form, content)).toEqual({ ok: true, content })
  })

  it.each([
    [{ name: undefined }, 'ELICITATION_MISSING_FIELD', 'name', '"name" is required'],
    [{ extra: 1 }, 'ELICITATION_UNKNOWN_FIELD', 'extra', '"extra" is not a field of this form'],
    [{ age: '36' }, 'ELICITATION_WRONG_TYPE', 'age', '"age" must be a number'],
    [{ age: 36.5 }, 'ELICITATION_WRONG_TYPE', 'age', '"age" must be a whole number'],
    [{ age: Number.NaN }, 'ELICITATION_WRONG_TYPE', 'age', '"age" must be a number'],
    [{ age: 151 }, 'ELICITATION_OUT_OF_RANGE', 'age', '"age" must be at most 150'],
    [{ age: -1 }, 'ELICITATION_OUT_OF_RANGE', 'age', '"age" must be at least 0'],
    [{ verified: 'yes' }, 'ELICITATION_WRONG_TYPE', 'verified', '"verified" must be true or false'],
    [{ name: 'A' }, 'ELICITATION_OUT_OF_RANGE', 'name', '"name" must be at least 2 characters'],
    [{ name: 'A'.repeat(21) }, 'ELICITATION_OUT_OF_RANGE', 'name', '"name" must be at most 20 characters'],
    [
      { status: 'deleted' },
      'ELICITATION_NOT_IN_ENUM',
      'status',
      '"status" must be one of "active", "inactive", "pending"',
    ],
    [{ plan: 'Pro' }, 'ELICITATION_NOT_IN_ENUM', 'plan', '"plan" must be one of "free", "pro"'],
    [{ email: 'not-an-email' }, 'ELICITATION_BAD_FORMAT', 'email', '"email" must be an email address'],
    [{ homepage: 'no scheme' }, 'ELICITATION_BAD_FORMAT', 'homepage', '"homepage" must be a URI'],
    [{ born: '2026-02-30' }, 'ELICITATION_BAD_FORMAT', 'born', '"born" must be a date (YYYY-MM-DD)'],
    [{ seen: '2026-12-02 03:00' }, 'ELICITATION_BAD_FORMAT', 'seen', '"seen" must be a date and time (RFC 3339)'],
    [{ tags: 'a' }, 'ELICITATION_WRONG_TYPE', 'tags', '"tags" must be a list of choices'],
    [{ tags: ['a', 'z'] }, 'ELICITATION_NOT_IN_ENUM', 'tags', '"z" is not a choice of "tags"'],
    [{ tags: [] }, 'ELICITATION_OUT_OF_RANGE', 'tags', '"tags" needs at least 1 choices'],
    [{ tags: ['a', 'b', 'c'] }, 'ELICITATION_OUT_OF_RANGE', 'tags', '"tags" takes at most 2 choices'],
  ])('refuses %j: %s', (content, code, field, message) => {
    expect(check(content)).toEqual({ ok: false, error: { code, field, message } })
  })

  it('refuses content that is not an object', () => {
    for (const content of [null, 'text', ['a'], 3]) {
      expect(validateElicitationContent(form, content)).toEqual({
        ok: false,
        error: { code: 'ELICITATION_NOT_OBJECT', message: 'the content must be an object of field values' },
      })
    }
  })

  it('a server schema with a type outside the spec fails closed', () => {
    const odd = JSON.parse('{"type":"object","properties":{"blob":{"type":"object"}}}') as ElicitationSchema
    expect(validateElicitationContent(odd, { blob: {} })).toEqual({
      ok: false,
      error: { code: 'ELICITATION_BAD_SCHEMA', field: 'blob', message: '"blob" has a type this client does not know' },
    })
  })

  it('counts characters, not UTF-16 units, for min/maxLength', () => {
    expect(check({ name: '🙂🙂' })).toMatchObject({ ok: true })
  })
})
