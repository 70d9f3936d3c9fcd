import { describe, expect, it } from 'vitest'
import { ChronicleEvent } from '../../src/events/catalogue.js'
import { ChronicleError } from '../../src/events/errors.js'
import { validate } from '../../src/events/rows.js'

/**
 * validate() checks the three delta types by hand (they are most of the log).
 * Whatever it is given, it must answer exactly as their schema does: the same
 * data back, or INVALID_EVENT.
 */

const viaSchema = (e: unknown) => {
  const r = ChronicleEvent.safeParse(e)
  return r.success ? r.data : 'INVALID_EVENT'
}
const viaValidate = (e: unknown) => {
  try {
    return validate([e as ChronicleEvent])[0]
  } catch (err) {
    expect(err).toBeInstanceOf(ChronicleError)
    return (err as ChronicleError).code
  }
}

const shapes: unknown[] = [
  { partId: 'prt_1', text: 'hello' },
  { partId: 'prt_1', text: '' },
  { text: 'first', partId: 'prt_1' },
  { partId: 'prt_1', delta: '{"a"' },
  { partId: '', text: 'x' },
  { partId: 'p'.repeat(200), text: 'x' },
  { partId: 'p'.repeat(201), text: 'x' },
  { partId: 'prt_1' },
  { partId: 'prt_1', text: 7 },
  { partId: 42, text: 'x' },
  { partId: 'prt_1', text: 'x', extra: 'stripped by the schema' },
  { partId: 'prt_1', other: 'x' },
  { partId: 'prt_1', text: 'x', delta: 'y' },
  null,
  'text',
  ['prt_1', 'x'],
  Object.assign(Object.create({ inherited: 1 }), { partId: 'prt_1', text: 'x' }),
]

describe('validating deltas', () => {
  for (const type of ['text.delta', 'reasoning.delta', 'tool.input.delta']) {
    it(`${type}: answers as its schema does for every shape`, () => {
      for (const data of shapes) {
        const event = { type, data }
        expect(viaValidate(event), JSON.stringify(data)).toEqual(viaSchema(event))
      }
    })
  }

  it('keeps the schema’s field order, so the stored JSON is the same', () => {
    const [e] = validate([{ type: 'text.delta', data: { text: 'x', partId: 'prt_1' } } as unknown as ChronicleEvent])
    expect(JSON.stringify(e)).toBe('{"type":"text.delta","data":{"partId":"prt_1","text":"x"}}')
  })
})
