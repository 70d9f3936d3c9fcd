import { describe, expect, it } from 'vitest'
import { parseSkillFile } from '../../src/tools/skills/skill-file.js'

/** SKILL.md front matter (docs/TOOLS.md "skill"): what is read, what is ignored, and why a file is malformed. */
describe('parseSkillFile', () => {
  it('reads name, description and body; quotes, CRLF, a BOM and folded lines are understood', () => {
    expect(
      parseSkillFile(
        '\uFEFF---\r\nname: "pdf-tools"\r\ndescription: >\r\n  Fill PDF forms\r\n  and merge them\r\n---\r\n\r\nBody line\r\n',
      ),
    ).toEqual({
      name: 'pdf-tools',
      description: 'Fill PDF forms and merge them',
      body: 'Body line',
      ignored: [],
    })
  })

  it('names every other key as ignored, lists included', () => {
    expect(parseSkillFile('---\nname: x\ndescription: y\nallowed-tools:\n  - Bash\nlicense: MIT\n---\nb')).toEqual({
      name: 'x',
      description: 'y',
      body: 'b',
      ignored: ['allowed-tools', 'license'],
    })
  })

  it.each([
    ['no front matter', 'hello', 'it does not start with front matter (a `---` line)'],
    ['no closing line', '---\nname: x\n', 'its front matter has no closing `---` line'],
    ['a stray line', '---\nname: x\n!!\n---\n', 'its front matter has a line that is not `key: value`: "!!"'],
    ['no name', '---\ndescription: y\n---\n', 'its front matter has no `name`'],
    [
      'a path for a name',
      '---\nname: ../x\ndescription: y\n---\n',
      'its name "../x" is not lowercase words joined by hyphens (at most 64 characters)',
    ],
    [
      'an upper-case name',
      '---\nname: Deploy\ndescription: y\n---\n',
      'its name "Deploy" is not lowercase words joined by hyphens (at most 64 characters)',
    ],
    ['no description', '---\nname: x\n---\n', 'its front matter has no `description`'],
    [
      'a long description',
      `---\nname: x\ndescription: ${'d'.repeat(1025)}\n---\n`,
      'its description is longer than 1024 characters',
    ],
  ])('%s is malformed, said why', (_, text, error) => {
    expect(parseSkillFile(text)).toEqual({ error })
  })
})
