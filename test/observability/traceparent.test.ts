import { Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { createLogger } from '../../src/http/logger.js'
import { formatTraceparent, parseTraceparent } from '../../src/observability/traceparent.js'

/**
 * The W3C traceparent a client sends and an event's meta records
 * (docs/OBSERVABILITY.md "Traces"), and the log lines that name a session
 * carrying its run's trace.
 */

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const SPAN = '00f067aa0ba902b7'

describe('traceparent', () => {
  it('reads the version-00 form, sampled or not, and writes it back the same', () => {
    expect(parseTraceparent(`00-${TRACE}-${SPAN}-01`)).toEqual({ traceId: TRACE, spanId: SPAN, sampled: true })
    expect(parseTraceparent(`00-${TRACE}-${SPAN}-00`)).toEqual({ traceId: TRACE, spanId: SPAN, sampled: false })
    for (const value of [`00-${TRACE}-${SPAN}-01`, `00-${TRACE}-${SPAN}-00`])
      expect(formatTraceparent(parseTraceparent(value)!)).toBe(value)
  })

  it('anything else is no context: other versions, upper case, zero ids, other lengths, not a string', () => {
    for (const value of [
      `ff-${TRACE}-${SPAN}-01`,
      `01-${TRACE}-${SPAN}-01-more`,
      `00-${TRACE.toUpperCase()}-${SPAN}-01`,
      `00-${'0'.repeat(32)}-${SPAN}-01`,
      `00-${TRACE}-${'0'.repeat(16)}-01`,
      `00-${TRACE}-${SPAN}-1`,
      ` 00-${TRACE}-${SPAN}-01`,
      `00-${TRACE}-${SPAN}-01\n`,
      '',
      undefined,
      42,
      [`00-${TRACE}-${SPAN}-01`],
    ])
      expect(parseTraceparent(value)).toBeUndefined()
  })
})

describe('log lines with traces on', () => {
  function logged(traceFieldsOf: (sessionId: string) => { trace_id: string; span_id: string } | undefined) {
    const lines: Record<string, unknown>[] = []
    const destination = new Writable({
      write(chunk, _enc, done) {
        lines.push(JSON.parse(String(chunk)) as Record<string, unknown>)
        done()
      },
    })
    const logger = createLogger({ level: 'info', secrets: [], destination, format: 'json', traceFieldsOf })
    return { logger, lines }
  }
  const open = new Map([['ses_open', { trace_id: TRACE, span_id: SPAN }]])

  it("a line naming a session with an open run carries the run's trace and span; others carry none", () => {
    const { logger, lines } = logged((id) => open.get(id))
    logger.warn({ sessionId: 'ses_open' }, 'about a running session')
    logger.warn({ sessionId: 'ses_idle' }, 'about an idle one')
    logger.info('about nothing in particular')
    expect(lines.map((l) => [l.msg, l.trace_id, l.span_id])).toEqual([
      ['about a running session', TRACE, SPAN],
      ['about an idle one', undefined, undefined],
      ['about nothing in particular', undefined, undefined],
    ])
  })

  it('a line that names its own trace keeps it', () => {
    const { logger, lines } = logged((id) => open.get(id))
    logger.warn({ sessionId: 'ses_open', trace_id: 'mine', span_id: 'mine too' }, 'its own')
    expect(lines[0]).toMatchObject({ trace_id: 'mine', span_id: 'mine too' })
  })
})
