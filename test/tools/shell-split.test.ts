import { describe, expect, it } from 'vitest'
import { splitShellCommand } from '../../src/tools/permission/shell-split.js'

const split = (c: string) => splitShellCommand(c)

describe('splitShellCommand', () => {
  it('splits on && || ; | & and newlines', () => {
    expect(split('git fetch && git clean -fd')).toEqual({ commands: ['git fetch', 'git clean -fd'], complete: true })
    expect(split('a || b; c | d & e\nf')).toEqual({ commands: ['a', 'b', 'c', 'd', 'e', 'f'], complete: true })
  })

  it('keeps redirections such as 2>&1 and &> inside one command', () => {
    expect(split('make 2>&1 | tee log')).toEqual({ commands: ['make 2>&1', 'tee log'], complete: true })
    expect(split('make &>/dev/null')).toEqual({ commands: ['make &>/dev/null'], complete: true })
  })

  it('does not split inside quotes, and keeps quoted text', () => {
    expect(split(`echo 'a && b' "c; d"`)).toEqual({ commands: [`echo 'a && b' "c; d"`], complete: true })
  })

  it('finds commands inside $( ), backticks (also in double quotes) and <( )', () => {
    expect(split('echo $(rm -rf /tmp/x)').commands).toEqual(['echo $(rm -rf /tmp/x)', 'rm -rf /tmp/x'])
    expect(split('echo `git clean -fd`').commands).toEqual(['echo `git clean -fd`', 'git clean -fd'])
    expect(split('echo "now: $(date; git clean -x)"').commands).toEqual(['echo "now: $(date; git clean -x)"', 'date', 'git clean -x'])
    expect(split('diff <(ls a) <(ls b)').commands).toEqual(['diff <(ls a) <(ls b)', 'ls a', 'ls b'])
    expect(split('echo $(echo $(git clean -fd))').commands).toEqual([
      'echo $(echo $(git clean -fd))',
      'echo $(git clean -fd)',
      'git clean -fd',
    ])
  })

  it('does not treat single-quoted substitutions or arithmetic as commands', () => {
    expect(split("echo '$(git clean -fd)'").commands).toEqual(["echo '$(git clean -fd)'"])
    expect(split('echo $((1 + 2))').commands).toEqual(['echo $((1 + 2))'])
  })

  it('splits groups and subshells', () => {
    expect(split('(cd x && git clean -fd)').commands).toEqual(['cd x', 'git clean -fd'])
    expect(split('{ a; b; }').commands).toEqual(['a', 'b'])
  })

  it('splits the script of sh -c / bash -c, and adds the command without env assignments', () => {
    expect(split(`bash -c 'git fetch && git clean -fd'`).commands).toEqual([
      `bash -c 'git fetch && git clean -fd'`,
      'git fetch',
      'git clean -fd',
    ])
    expect(split('FOO=1 git clean -fd').commands).toEqual(['FOO=1 git clean -fd', 'git clean -fd'])
  })

  it('ignores comments', () => {
    expect(split('ls # && rm -rf /').commands).toEqual(['ls'])
  })

  it('reports text it cannot follow as incomplete', () => {
    expect(split(`echo 'unterminated && git clean`).complete).toBe(false)
    expect(split('echo $(git clean -fd').complete).toBe(false)
    expect(split('echo `x').complete).toBe(false)
  })
})

describe('splitShellCommand (property)', () => {
  it('finds every simple command however they are chained, grouped or substituted', async () => {
    const fc = await import('fast-check')
    const word = fc.stringMatching(/^[a-z][a-z0-9._-]{0,6}$/)
    const simple = fc.array(word, { minLength: 1, maxLength: 4 }).map((w) => w.join(' '))
    const op = fc.constantFrom(' && ', ' || ', '; ', ' | ', ' & ', '\n')
    const wrap = fc.constantFrom(
      (c: string) => c,
      (c: string) => `(${c})`,
      (c: string) => `echo $(${c})`,
      (c: string) => `echo \`${c}\``,
      (c: string) => `echo "x $(${c}) y"`,
      (c: string) => `bash -c '${c}'`,
      (c: string) => `{ ${c}; }`,
    )
    fc.assert(
      fc.property(fc.array(fc.tuple(simple, wrap, op), { minLength: 1, maxLength: 6 }), (parts) => {
        const command = parts.map(([c, w], i) => w(c) + (i < parts.length - 1 ? (parts[i]?.[2] ?? '; ') : '')).join('')
        const { commands, complete } = splitShellCommand(command)
        expect(complete).toBe(true)
        for (const [c] of parts) expect(commands).toContain(c)
      }),
      { numRuns: 300 },
    )
  })
})
