import { z } from 'zod'
import { MAX_SKILL_BYTES, type SkillSource } from '../skills/skills.js'
import { defineTool, ToolFailure } from '../tool.js'

/**
 * `skill {name}` (docs/TOOLS.md "skill"): the full SKILL.md body of a skill
 * the system prompt lists, found afresh in the session's directory. Its output
 * is recorded like any tool's, so `audit` rebuilds the requests after it
 * (docs/AUDIT.md). Permission `skill`, pattern the name: allowed by default,
 * and a rule can deny one skill or all of them.
 */
export function createSkillTool(deps: { readonly skills: SkillSource }) {
  return defineTool({
    id: 'skill',
    description:
      'Loads a skill listed in the system prompt under <skills>: its full instructions. Load one when the task matches its description.',
    parameters: z.object({ name: z.string().min(1).max(200).describe('The skill name, as listed under <skills>') }),
    permission: 'skill',
    async execute(args, ctx) {
      await ctx.ask({ permission: 'skill', patterns: [args.name], metadata: { name: args.name } })
      const skill = deps.skills.load(ctx.directory, args.name)
      if (!skill) {
        const known = deps.skills.list(ctx.directory).skills.map((s) => s.name)
        throw new ToolFailure(
          'failed',
          `SKILL_NOT_FOUND: no skill named ${JSON.stringify(args.name)}; ` +
            (known.length > 0 ? `the skills are: ${known.join(', ')}` : 'there are no skills in this session'),
        )
      }
      const cut =
        skill.truncatedFrom === undefined
          ? ''
          : `\n\n[SKILL.md is ${skill.truncatedFrom} bytes: only its first ${MAX_SKILL_BYTES} bytes were read]`
      return {
        title: skill.name,
        output: `<skill name="${skill.name}" origin="${skill.origin}" path="${skill.path}">\n${skill.body}${cut}\n</skill>`,
        metadata: {
          name: skill.name,
          origin: skill.origin,
          path: skill.path,
          ...(skill.truncatedFrom !== undefined && { truncatedFrom: skill.truncatedFrom }),
        },
      }
    },
  })
}
