/**
 * A SKILL.md (docs/TOOLS.md "skill"): front matter between `---` lines with
 * `name` and `description`, then the body the `skill` tool loads. Only those
 * two keys mean anything: keys that would grant something — `allowed-tools`,
 * `tools`, `permissions`, … — are reported as ignored, never honoured, so a
 * skill stays instructions (docs/SECURITY.md "Workspace skills").
 */

export interface SkillFile {
  readonly name: string
  readonly description: string
  readonly body: string
  /** front matter keys besides name and description, which Chronicle does not honour */
  readonly ignored: readonly string[]
}

/** Lowercase words joined by hyphens, as in the Agent Skills format: never a path (`..`, `/`). */
export const SKILL_NAME = /^[a-z0-9]+(?:[-_][a-z0-9]+)*$/
export const MAX_NAME_CHARS = 64
export const MAX_DESCRIPTION_CHARS = 1024

/** The parsed file, or why it is malformed (one sentence, for the note the listing shows). */
export function parseSkillFile(text: string): SkillFile | { readonly error: string } {
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/)
  if (lines[0]?.trim() !== '---') return { error: 'it does not start with front matter (a `---` line)' }
  const end = lines.findIndex((l, i) => i > 0 && l.trim() === '---')
  if (end < 0) return { error: 'its front matter has no closing `---` line' }
  const fields = new Map<string, string>()
  let key: string | undefined
  for (const line of lines.slice(1, end)) {
    if (line.trim() === '' || line.trimStart().startsWith('#')) continue
    const field = /^([A-Za-z][\w-]*)\s*:(.*)$/.exec(line)
    if (field?.[1] !== undefined) {
      key = field[1]
      fields.set(key, unquote((field[2] ?? '').trim()))
    } else if (key !== undefined && /^\s/.test(line)) {
      // a continuation (a folded description, a list under allowed-tools): joined with a space
      fields.set(key, `${fields.get(key) ?? ''} ${line.trim()}`.trim())
    } else
      return { error: `its front matter has a line that is not \`key: value\`: ${JSON.stringify(line.slice(0, 80))}` }
  }
  const name = fields.get('name') ?? ''
  const description = (fields.get('description') ?? '').replace(/^[>|][+-]?\s*/, '')
  if (!name) return { error: 'its front matter has no `name`' }
  if (name.length > MAX_NAME_CHARS || !SKILL_NAME.test(name))
    return {
      error: `its name ${JSON.stringify(name.slice(0, 80))} is not lowercase words joined by hyphens (at most ${MAX_NAME_CHARS} characters)`,
    }
  if (!description) return { error: 'its front matter has no `description`' }
  if (description.length > MAX_DESCRIPTION_CHARS)
    return { error: `its description is longer than ${MAX_DESCRIPTION_CHARS} characters` }
  const ignored = [...fields.keys()].filter((k) => k !== 'name' && k !== 'description')
  return {
    name,
    description,
    body: lines
      .slice(end + 1)
      .join('\n')
      .trim(),
    ignored,
  }
}

function unquote(value: string): string {
  const quoted = /^(['"])(.*)\1$/.exec(value)
  return quoted ? (quoted[2] ?? '') : value
}
