/**
 * The form an MCP server's question asks for (`elicitation/create`,
 * docs/TOOLS.md "Elicitation"), read from its requested schema: the spec's
 * primitive fields — text (email, URL, date), number, integer, boolean, a
 * single choice — with their labels, defaults and whether they are
 * required. The page draws them as a form (src/web/views/elicitations.tsx),
 * the terminal asks them one by one (src/cli/elicit.ts).
 */

/** One field of a requested form: the spec's primitive fields. */
export interface ElicitationField {
  readonly name: string
  readonly label: string
  readonly description?: string
  readonly kind: 'text' | 'email' | 'url' | 'date' | 'number' | 'integer' | 'boolean' | 'choice'
  readonly choices?: readonly { readonly value: string; readonly label: string }[]
  readonly required: boolean
  readonly initial: string | boolean
}

/** The form's fields; the names of those a client cannot ask (the server's schema is hostile input: no throw). */
export function fieldsOf(schema: Record<string, unknown>): { fields: ElicitationField[]; unsupported: string[] } {
  const properties = record(schema['properties'])
  const required = Array.isArray(schema['required']) ? schema['required'].filter((r) => typeof r === 'string') : []
  const fields: ElicitationField[] = []
  const unsupported: string[] = []
  for (const [name, raw] of Object.entries(properties)) {
    const p = record(raw)
    const label = typeof p['title'] === 'string' && p['title'] ? p['title'] : name
    const base = {
      name,
      label,
      required: required.includes(name),
      ...(typeof p['description'] === 'string' && { description: p['description'] }),
    }
    const choices = choicesOf(p)
    const fallback = p['default']
    if (choices) {
      fields.push({ ...base, kind: 'choice', choices, initial: typeof fallback === 'string' ? fallback : '' })
    } else if (p['type'] === 'boolean') {
      fields.push({ ...base, kind: 'boolean', initial: fallback === true })
    } else if (p['type'] === 'number' || p['type'] === 'integer') {
      fields.push({ ...base, kind: p['type'], initial: typeof fallback === 'number' ? String(fallback) : '' })
    } else if (p['type'] === 'string') {
      const format = p['format']
      const kind = format === 'email' ? 'email' : format === 'uri' ? 'url' : format === 'date' ? 'date' : 'text'
      fields.push({ ...base, kind, initial: typeof fallback === 'string' ? fallback : '' })
    } else unsupported.push(label)
  }
  return { fields, unsupported }
}

/** `enum` (with `enumNames`) or `oneOf` of `{const, title}`: the spec's single-choice fields. */
function choicesOf(p: Record<string, unknown>): { value: string; label: string }[] | undefined {
  if (Array.isArray(p['enum'])) {
    const names = Array.isArray(p['enumNames']) ? p['enumNames'] : []
    return p['enum']
      .filter((v): v is string => typeof v === 'string')
      .map((v, i) => ({ value: v, label: typeof names[i] === 'string' ? names[i] : v }))
  }
  if (Array.isArray(p['oneOf'])) {
    return p['oneOf'].flatMap((o) => {
      const c = record(o)
      return typeof c['const'] === 'string'
        ? [{ value: c['const'], label: typeof c['title'] === 'string' ? c['title'] : c['const'] }]
        : []
    })
  }
  return undefined
}

function record(v: unknown): Record<string, unknown> {
  return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {}
}
