import { readdirSync, realpathSync } from 'node:fs'
import { join, relative } from 'node:path'
import type { CredentialPaths } from '../credentials/credential-paths.js'
import { isForbidden } from '../paths.js'
import { readInside } from '../read-inside.js'
import { parseSkillFile } from './skill-file.js'

/**
 * Skills (docs/TOOLS.md "skill"): folders holding a SKILL.md, found in the
 * user's config directory (`<config dir>/skills/<name>/SKILL.md`) and in the
 * session directory (`.agents/skills/`, then `.claude/skills/`). Found afresh
 * at every step, like AGENTS.md; the listing goes into the system prompt, which
 * is recorded (docs/AUDIT.md), and a body reaches the model only as the output
 * of a `skill` call, which is recorded too.
 *
 * Where two share a name the first found wins: the user's own over the
 * workspace's — a repository cannot replace a skill the user installed — then
 * `.agents/` over `.claude/`. A workspace skill is read only when its real
 * path lies inside the session directory, never inside Chronicle's data or
 * config, never in the user's hidden credentials (docs/SECURITY.md).
 */

export type SkillOrigin = 'user' | 'workspace'

export interface Skill {
  readonly name: string
  readonly description: string
  readonly origin: SkillOrigin
  /** the SKILL.md as found (not resolved): what the listing names */
  readonly path: string
  readonly ignored: readonly string[]
}

export interface SkillListing {
  readonly skills: readonly Skill[]
  /** SKILL.md files skipped, each with why (malformed, too many, a name already taken, outside its root) */
  readonly notes: readonly string[]
}

export interface LoadedSkill extends Skill {
  readonly body: string
  /** the file's size when it was larger than MAX_SKILL_BYTES (the body is its head) */
  readonly truncatedFrom?: number
}

export interface SkillSource {
  list(directory: string): SkillListing
  /** the skill named `name` as found now, with its body; undefined when none is */
  load(directory: string, name: string): LoadedSkill | undefined
}

export interface SkillSourceOptions {
  /** the user's skills folder (`<config dir>/skills`); absent: only workspace skills */
  readonly userDir?: string
  /** Chronicle's data dir and config file: never read (docs/SECURITY.md) */
  readonly forbidden?: readonly string[]
  readonly credentials?: CredentialPaths
}

/** A SKILL.md is read up to this many bytes; a larger one is listed, and loaded cut to this with a note. */
export const MAX_SKILL_BYTES = 64 * 1024
/** A listing reads this much of each SKILL.md: front matter must close within it. */
export const MAX_FRONT_MATTER_BYTES = 8 * 1024
/** Skills listed at most (per session): the rest are noted, so a repository cannot flood the prompt. */
export const MAX_SKILLS = 64

export const WORKSPACE_SKILL_DIRS = ['.agents/skills', '.claude/skills'] as const

export function createSkillSource(options: SkillSourceOptions = {}): SkillSource {
  function scan(directory: string, wanted?: string): { listing: SkillListing; found?: LoadedSkill } {
    const skills: Skill[] = []
    const notes: string[] = []
    const taken = new Map<string, string>()
    let found: LoadedSkill | undefined
    const roots: { origin: SkillOrigin; dir: string; root: string }[] = [
      ...(options.userDir ? [{ origin: 'user' as const, dir: options.userDir, root: options.userDir }] : []),
      ...WORKSPACE_SKILL_DIRS.map((d) => ({ origin: 'workspace' as const, dir: join(directory, d), root: directory })),
    ]
    for (const { origin, dir, root } of roots) {
      const realRoot = realOrUndefined(root)
      if (realRoot === undefined) continue
      for (const folder of folders(dir)) {
        const path = join(dir, folder, 'SKILL.md')
        // a folder name is the workspace's text: control characters shown as `?` so it cannot start a line of its own
        const shown = (origin === 'user' ? path : relative(directory, path)).replace(/\p{Cc}/gu, '?')
        // a listing needs only the front matter: found at every step, so only each file's head is read
        const read = readInside(realRoot, path, wanted === undefined ? MAX_FRONT_MATTER_BYTES : MAX_SKILL_BYTES)
        if (read === undefined) {
          if (realOrUndefined(path) !== undefined)
            notes.push(
              `${shown}: skipped, its real path is outside ${origin === 'user' ? 'the skills folder' : 'the session directory'}`,
            )
          continue
        }
        if (
          isForbidden(read.real, options.forbidden, directory) ||
          (origin === 'workspace' && options.credentials?.view(directory).hiding(read.real) !== undefined)
        ) {
          notes.push(`${shown}: skipped, it resolves into files no tool may read`)
          continue
        }
        const parsed = parseSkillFile(read.text)
        if ('error' in parsed) {
          notes.push(`${shown}: skipped, ${parsed.error}`)
          continue
        }
        const first = taken.get(parsed.name)
        if (first !== undefined) {
          notes.push(`${shown}: skipped, the name ${parsed.name} is already taken by ${first}`)
          continue
        }
        if (skills.length >= MAX_SKILLS) {
          notes.push(`${shown}: skipped, at most ${MAX_SKILLS} skills are listed`)
          continue
        }
        taken.set(parsed.name, shown)
        const skill: Skill = {
          name: parsed.name,
          description: parsed.description,
          origin,
          path: shown,
          ignored: parsed.ignored,
        }
        skills.push(skill)
        if (parsed.name === wanted)
          found = { ...skill, body: parsed.body, ...(read.bytes > MAX_SKILL_BYTES && { truncatedFrom: read.bytes }) }
      }
    }
    return { listing: { skills, notes }, ...(found && { found }) }
  }
  return {
    list: (directory) => scan(directory).listing,
    load: (directory, name) => scan(directory, name).found,
  }
}

/** Subfolders of `dir`, sorted (the listing is the same on every machine); none when it is missing. */
function folders(dir: string): string[] {
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isDirectory() || e.isSymbolicLink())
      .map((e) => e.name)
      .sort()
  } catch {
    return []
  }
}

function realOrUndefined(path: string): string | undefined {
  try {
    return realpathSync(path)
  } catch {
    return undefined
  }
}
