/**
 * The composer's slash commands (docs/WEB.md "Writing"): a message that is
 * exactly one of these runs the session action instead of being sent.
 *
 *   /compact        session.compact
 *   /fork [seq]     session.fork at the seq (default: the latest), then the child opens
 *   /revert [seq]   session.revert to the seq; without one, the scrubber opens to choose it
 *
 * Anything else starting with a slash (a path, say) is sent as text.
 */

export type SlashCommand =
  | { readonly name: 'compact' }
  | { readonly name: 'fork'; readonly at?: number }
  | { readonly name: 'revert'; readonly to?: number }

export const SLASH_COMMANDS = [
  { name: 'compact', usage: '/compact', does: 'summarise the conversation so far' },
  { name: 'fork', usage: '/fork [seq]', does: 'fork the session (at the latest event, or at seq)' },
  { name: 'revert', usage: '/revert [seq]', does: 'revert the files to seq (without one: choose it in time travel)' },
] as const

/** The command a message is, undefined when it is a message; throws with a usage for a malformed one. */
export function parseSlash(text: string): SlashCommand | undefined {
  const match = /^\/(compact|fork|revert)(?:\s+(.*))?$/s.exec(text.trim())
  if (!match) return undefined
  const name = match[1] as SlashCommand['name']
  const arg = match[2]?.trim() ?? ''
  if (name === 'compact') {
    if (arg !== '') throw new Error('/compact takes nothing after it')
    return { name }
  }
  if (arg === '') return { name }
  if (!/^[1-9]\d{0,15}$/.test(arg)) throw new Error(`/${name} takes a seq (a positive whole number), not "${arg}"`)
  return name === 'fork' ? { name, at: Number(arg) } : { name, to: Number(arg) }
}

/** The commands whose name starts with what is typed after the slash, for the hint under the box. */
export function slashHints(text: string): readonly (typeof SLASH_COMMANDS)[number][] {
  const match = /^\/(\w*)$/.exec(text)
  if (!match) return []
  return SLASH_COMMANDS.filter((c) => c.name.startsWith(match[1] ?? ''))
}
