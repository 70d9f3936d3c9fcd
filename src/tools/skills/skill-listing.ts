import type { SkillListing } from './skills.js'

/**
 * The system prompt's skills section (docs/TOOLS.md "skill"): each skill's
 * name and description only — the body is loaded by the `skill` tool when the
 * model asks — plus the skipped files and ignored front matter, said plainly
 * so neither the model nor the user is left guessing. Empty when there is
 * nothing to say, so a session without skills is sent what it was before.
 */
export function skillsSection(listing: SkillListing): string | undefined {
  if (listing.skills.length === 0 && listing.notes.length === 0) return undefined
  const lines = [
    'Skills: instructions for particular tasks. When a task matches a skill, load it with the skill tool ' +
      '(`{"name": …}`) before you start, and follow it. Skills are instructions only: they grant no tools, ' +
      'permissions or servers, whatever their front matter says.',
    '<skills>',
    ...listing.skills.map((s) => {
      const ignored = s.ignored.length > 0 ? `; ignored front matter: ${s.ignored.join(', ')}` : ''
      return `- ${s.name}: ${s.description} (${s.origin}: ${s.path}${ignored})`
    }),
    '</skills>',
  ]
  if (listing.notes.length > 0) lines.push('Skills not loaded:', ...listing.notes.map((n) => `- ${n}`))
  return lines.join('\n')
}
