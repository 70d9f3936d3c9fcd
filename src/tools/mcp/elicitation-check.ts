import type { ElicitationValue } from '../../events/catalogue.js'
import { applyElicitationDefaults, type ElicitationSchema, validateElicitationContent } from './elicitation-content.js'

/**
 * An accepted elicitation answer as the answer command checks it
 * (src/commands/elicitation.ts `ContentCheck`): the schema's defaults
 * applied, then the content validated against the requested schema.
 */
export function checkElicitationContent(
  schema: Record<string, unknown>,
  content: Record<string, unknown>,
): { ok: true; content: Record<string, ElicitationValue> } | { ok: false; problems: string[] } {
  const requested = schema as ElicitationSchema // as the SDK parsed it when the server asked, before it was logged
  const checked = validateElicitationContent(requested, applyElicitationDefaults(requested, content))
  return checked.ok ? checked : { ok: false, problems: [`${checked.error.code}: ${checked.error.message}`] }
}
