import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startServer, type TestServer } from './helpers.js'

/**
 * The composed server finds skills (docs/TOOLS.md "skill"): the user's config dir's and the session directory's,
 * listed in what the next step would be sent, with the `skill` tool offered.
 */

let server: TestServer
let user: string

beforeAll(async () => {
  user = mkdtempSync(join(tmpdir(), 'chronicle-http-skills-'))
  server = await startServer({ CHRONICLE_LOG_LEVEL: 'warn' }, { listen: false, config: { skillsDir: user } })
  mkdirSync(join(user, 'deploy'))
  writeFileSync(join(user, 'deploy', 'SKILL.md'), '---\nname: deploy\ndescription: Ship it\n---\nbody\n')
  mkdirSync(join(server.dir, '.claude/skills/review'), { recursive: true })
  writeFileSync(join(server.dir, '.claude/skills/review/SKILL.md'), '---\nname: review\ndescription: Review\n---\nb\n')
})
afterAll(() => server.close())

const inject = (method: string, url: string, payload?: unknown) =>
  server.chronicle.app.inject({
    method: method as 'GET',
    url,
    headers: { authorization: `Bearer ${server.token}` },
    ...(payload !== undefined && { payload: payload as object }),
  })

describe('skills in the composed server', () => {
  it("lists the user's and the session directory's skills in the next request, and offers the skill tool", async () => {
    const created = await inject('POST', '/sessions', { directory: server.dir })
    expect(created.statusCode).toBe(201)
    const id = (created.json() as { session: { id: string } }).session.id
    const context = (await inject('GET', `/sessions/${id}/context`)).json() as {
      system: string
      tools: { name: string }[]
    }
    expect(context.system.slice(context.system.indexOf('<skills>'))).toBe(
      [
        '<skills>',
        `- deploy: Ship it (user: ${join(user, 'deploy', 'SKILL.md')})`,
        '- review: Review (workspace: .claude/skills/review/SKILL.md)',
        '</skills>',
      ].join('\n'),
    )
    expect(context.tools.map((t) => t.name)).toContain('skill')
  })
})
