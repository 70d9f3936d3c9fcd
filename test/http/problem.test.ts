import { describe, expect, it } from 'vitest'
import { ChronicleError } from '../../src/events/errors.js'
import { errorBody, problemBody, toProblem } from '../../src/http/problem.js'

describe('errors as clients see them', () => {
  it('an internal failure (a corrupt row included) is INTERNAL on both transports and leaks nothing', () => {
    for (const err of [
      new ChronicleError('CORRUPT_EVENT', 'row at seq 42 is not valid JSON: {"secret"'),
      new Error('db at /srv/x is locked'),
    ]) {
      const problem = toProblem(err)
      expect(problem.internal).toBe(true)
      const http = problemBody(problem, '/sessions/ses_1')
      expect(http).toEqual({
        type: 'https://chronicle.dev/errors/internal',
        title: 'INTERNAL',
        status: 500,
        code: 'INTERNAL',
        detail: 'internal error',
        instance: '/sessions/ses_1',
      })
      expect(errorBody(problem)).toEqual({ code: 'INTERNAL', message: 'internal error' })
    }
  })

  it('an expected failure keeps its code, message and details on both transports', () => {
    const problem = toProblem(
      new ChronicleError('VERSION_CONFLICT', 'session ses_1 is at version 3, expected 2', { actual: 3 }),
    )
    expect(problemBody(problem)).toMatchObject({
      status: 409,
      code: 'VERSION_CONFLICT',
      detail: 'session ses_1 is at version 3, expected 2',
      details: { actual: 3 },
    })
    expect(errorBody(problem)).toEqual({
      code: 'VERSION_CONFLICT',
      message: 'session ses_1 is at version 3, expected 2',
      details: { actual: 3 },
    })
  })
})
