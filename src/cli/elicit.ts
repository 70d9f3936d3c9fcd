import { type ElicitationField, fieldsOf } from '../client/elicitation-form.js'

/**
 * A tool server's question in the terminal (docs/TOOLS.md "Elicitation"):
 * `chronicle chat` asks the form's fields one line at a time — Enter keeps a
 * default, `/decline` or `/cancel` answer the whole question — and sends
 * `elicitation.answer` once the last field is given. The server checks the
 * content against the schema and applies its defaults; its refusal starts
 * the form again. A form with a field a terminal cannot ask (anything but the
 * spec's primitive fields) can only be declined or cancelled.
 */

export interface ElicitationAsk {
  readonly elicitationId: string
  readonly server: string
  readonly message: string
  readonly requestedSchema: Record<string, unknown>
}

export type Answer =
  | { readonly action: 'accept'; readonly content: Record<string, string | number | boolean> }
  | { readonly action: 'decline' | 'cancel' }

/** What a line typed at a question leads to: the next prompt, a refusal to say, or the answer. */
export type Step = { readonly prompt: string; readonly error?: string } | { readonly answer: Answer }

export class ElicitationForm {
  private readonly fields: readonly ElicitationField[]
  /** fields a terminal cannot ask: the form can only be declined or cancelled */
  readonly unsupported: readonly string[]
  private index = 0
  private content: Record<string, string | number | boolean> = {}

  constructor(readonly ask: ElicitationAsk) {
    const { fields, unsupported } = fieldsOf(ask.requestedSchema)
    this.fields = fields
    this.unsupported = unsupported
  }

  /** The prompt for where the form is. */
  prompt(): string {
    const field = this.fields[this.index]
    if (this.unsupported.length > 0 || !field)
      return `answer /decline or /cancel${this.unsupported.length > 0 ? ` (this form has fields a terminal cannot ask: ${this.unsupported.join(', ')})` : ''}: `
    const hint =
      field.kind === 'boolean'
        ? 'y/n'
        : field.kind === 'choice'
          ? (field.choices ?? []).map((c) => c.value).join('|')
          : field.kind
    const initial =
      field.initial === ''
        ? ''
        : `, default ${String(field.initial === true ? 'y' : field.initial === false ? 'n' : field.initial)}`
    return `  ${field.label}${field.required ? '*' : ''} (${hint}${initial}): `
  }

  /** Takes one typed line. */
  take(line: string): Step {
    const text = line.trim()
    if (text === '/decline' || text === '/cancel')
      return { answer: { action: text === '/decline' ? 'decline' : 'cancel' } }
    const field = this.fields[this.index]
    if (this.unsupported.length > 0 || !field) return { prompt: this.prompt() }
    const value = fieldValue(field, text)
    if (typeof value === 'object') return { prompt: this.prompt(), error: value.error }
    if (value !== undefined) this.content[field.name] = value
    this.index++
    if (this.index < this.fields.length) return { prompt: this.prompt() }
    return { answer: { action: 'accept', content: this.content } }
  }

  /** Back to the first field (the server refused what was given). */
  restart(): void {
    this.index = 0
    this.content = {}
  }
}

/** A typed line as the field's value; undefined leaves it out (the server applies its default). */
function fieldValue(field: ElicitationField, text: string): string | number | boolean | undefined | { error: string } {
  if (text === '') {
    if (field.kind === 'boolean') return field.initial === true
    if (field.initial !== '') return undefined
    return field.required ? { error: `${field.label} is required` } : undefined
  }
  switch (field.kind) {
    case 'boolean':
      if (/^(y|yes|true)$/i.test(text)) return true
      if (/^(n|no|false)$/i.test(text)) return false
      return { error: `${field.label}: answer y or n` }
    case 'number':
    case 'integer': {
      const n = Number(text)
      if (!Number.isFinite(n) || (field.kind === 'integer' && !Number.isInteger(n)))
        return { error: `${field.label}: ${text} is not ${field.kind === 'integer' ? 'a whole number' : 'a number'}` }
      return n
    }
    case 'choice':
      if (!(field.choices ?? []).some((c) => c.value === text))
        return { error: `${field.label}: one of ${(field.choices ?? []).map((c) => c.value).join(', ')}` }
      return text
    default:
      return text
  }
}
