import type { ElicitRequestFormParams } from '@modelcontextprotocol/sdk/types.js'

/**
 * The content of an accepted `elicitation/create` (form mode), checked
 * against the schema the server asked with. Pure: no I/O, no clock.
 *
 * - `applyElicitationDefaults(schema, content)`: the content with each
 *   property the user left out filled from the schema's `default` (SEP-1034).
 * - `validateElicitationContent(schema, content)`: `{ ok: true, content }`, or
 *   the first problem as `{ ok: false, error: { code, field?, message } }`.
 *
 * The requested schema is the spec's restricted subset: one flat object of
 * primitive properties (string with min/maxLength and format, number, integer,
 * boolean, single-select enum, multi-select enum array). The schema comes from
 * an MCP server and is not trusted either: an unknown property type is an
 * error, never a pass.
 */
export type ElicitationSchema = ElicitRequestFormParams['requestedSchema']
export type ElicitationContent = Record<string, string | number | boolean | string[]>

export type ElicitationContentErrorCode =
  | 'ELICITATION_NOT_OBJECT'
  | 'ELICITATION_UNKNOWN_FIELD'
  | 'ELICITATION_MISSING_FIELD'
  | 'ELICITATION_WRONG_TYPE'
  | 'ELICITATION_OUT_OF_RANGE'
  | 'ELICITATION_BAD_FORMAT'
  | 'ELICITATION_NOT_IN_ENUM'
  | 'ELICITATION_BAD_SCHEMA'

export interface ElicitationContentError {
  readonly code: ElicitationContentErrorCode
  readonly field?: string
  readonly message: string
}

export type ElicitationValidation =
  | { readonly ok: true; readonly content: ElicitationContent }
  | { readonly ok: false; readonly error: ElicitationContentError }

type Property = ElicitationSchema['properties'][string]

/** The content with the schema's defaults filled in for the properties it lacks; the input is not changed. */
export function applyElicitationDefaults(
  schema: ElicitationSchema,
  content: Readonly<Record<string, unknown>> = {},
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...content }
  for (const [key, property] of ownEntries(schema.properties)) {
    if (Object.hasOwn(out, key) && out[key] !== undefined) continue
    if (property.default === undefined) continue
    const value = Array.isArray(property.default) ? [...property.default] : property.default
    // defined, not assigned: a key named `__proto__` stays a plain field
    Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true })
  }
  return out
}

/** Checks content against the requested schema: required fields present, no others, each the right type and range. */
export function validateElicitationContent(schema: ElicitationSchema, content: unknown): ElicitationValidation {
  if (typeof content !== 'object' || content === null || Array.isArray(content))
    return fail('ELICITATION_NOT_OBJECT', undefined, 'the content must be an object of field values')
  const values = content as Record<string, unknown>
  const properties = new Map(ownEntries(schema.properties))
  for (const key of Object.keys(values)) {
    if (!properties.has(key)) return fail('ELICITATION_UNKNOWN_FIELD', key, `"${key}" is not a field of this form`)
  }
  for (const key of schema.required ?? []) {
    if (values[key] === undefined) return fail('ELICITATION_MISSING_FIELD', key, `"${key}" is required`)
  }
  for (const [key, property] of properties) {
    const value = values[key]
    if (value === undefined) continue
    const problem = checkValue(key, property, value)
    if (problem) return { ok: false, error: problem }
  }
  return { ok: true, content: values as ElicitationContent }
}

function checkValue(field: string, p: Property, value: unknown): ElicitationContentError | undefined {
  switch (p.type) {
    case 'boolean':
      return typeof value === 'boolean' ? undefined : wrongType(field, 'true or false')
    case 'number':
    case 'integer': {
      if (typeof value !== 'number' || !Number.isFinite(value)) return wrongType(field, 'a number')
      if (p.type === 'integer' && !Number.isInteger(value)) return wrongType(field, 'a whole number')
      if (p.minimum !== undefined && value < p.minimum)
        return error('ELICITATION_OUT_OF_RANGE', field, `"${field}" must be at least ${p.minimum}`)
      if (p.maximum !== undefined && value > p.maximum)
        return error('ELICITATION_OUT_OF_RANGE', field, `"${field}" must be at most ${p.maximum}`)
      return undefined
    }
    case 'string': {
      if (typeof value !== 'string') return wrongType(field, 'text')
      const choices = 'enum' in p ? p.enum : 'oneOf' in p ? p.oneOf.map((o) => o.const) : undefined
      if (choices) {
        return choices.includes(value)
          ? undefined
          : error(
              'ELICITATION_NOT_IN_ENUM',
              field,
              `"${field}" must be one of ${choices.map((c) => JSON.stringify(c)).join(', ')}`,
            )
      }
      if (!('minLength' in p || 'maxLength' in p || 'format' in p)) return undefined
      const length = [...value].length
      if (p.minLength !== undefined && length < p.minLength)
        return error('ELICITATION_OUT_OF_RANGE', field, `"${field}" must be at least ${p.minLength} characters`)
      if (p.maxLength !== undefined && length > p.maxLength)
        return error('ELICITATION_OUT_OF_RANGE', field, `"${field}" must be at most ${p.maxLength} characters`)
      if (p.format && !FORMATS[p.format](value))
        return error('ELICITATION_BAD_FORMAT', field, `"${field}" must be ${FORMAT_NAMES[p.format]}`)
      return undefined
    }
    case 'array': {
      if (!Array.isArray(value) || !value.every((v) => typeof v === 'string'))
        return wrongType(field, 'a list of choices')
      const choices = 'enum' in p.items ? p.items.enum : p.items.anyOf.map((o) => o.const)
      const stray = value.find((v) => !choices.includes(v))
      if (stray !== undefined)
        return error('ELICITATION_NOT_IN_ENUM', field, `${JSON.stringify(stray)} is not a choice of "${field}"`)
      if (p.minItems !== undefined && value.length < p.minItems)
        return error('ELICITATION_OUT_OF_RANGE', field, `"${field}" needs at least ${p.minItems} choices`)
      if (p.maxItems !== undefined && value.length > p.maxItems)
        return error('ELICITATION_OUT_OF_RANGE', field, `"${field}" takes at most ${p.maxItems} choices`)
      return undefined
    }
    default:
      return error('ELICITATION_BAD_SCHEMA', field, `"${field}" has a type this client does not know`)
  }
}

const FORMATS = {
  email: (v: string) => /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(v),
  uri: (v: string) => /^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(v) && URL.canParse(v),
  date: (v: string) => /^\d{4}-\d{2}-\d{2}$/.test(v) && isRealDate(v),
  'date-time': (v: string) =>
    /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/.test(v) &&
    isRealDate(v.slice(0, 10)) &&
    !Number.isNaN(Date.parse(v)),
} as const
const FORMAT_NAMES = {
  email: 'an email address',
  uri: 'a URI',
  date: 'a date (YYYY-MM-DD)',
  'date-time': 'a date and time (RFC 3339)',
}

/** `2026-02-30` matches the pattern but is no day: the round trip through Date catches it */
function isRealDate(v: string): boolean {
  const d = new Date(`${v}T00:00:00Z`)
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === v
}

/** own properties only: a hostile schema's `__proto__` key must not reach the prototype */
function ownEntries(properties: ElicitationSchema['properties']): [string, Property][] {
  return Object.entries(properties).filter(([, p]) => typeof p === 'object' && p !== null)
}

function wrongType(field: string, expected: string): ElicitationContentError {
  return error('ELICITATION_WRONG_TYPE', field, `"${field}" must be ${expected}`)
}

function error(code: ElicitationContentErrorCode, field: string | undefined, message: string): ElicitationContentError {
  return { code, ...(field !== undefined && { field }), message }
}

function fail(code: ElicitationContentErrorCode, field: string | undefined, message: string): ElicitationValidation {
  return { ok: false, error: error(code, field, message) }
}
