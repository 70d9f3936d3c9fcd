import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { runInProcess, runToEnd } from './helpers.js'

/** Help, version and bad flags (#18): what a new user types first answers at once and clearly. */

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }

describe('chronicle help and version', () => {
  it.each([['--help'], ['-h'], ['help']])('%s lists every command and exits 0', async (flag) => {
    const r = await runInProcess([flag])
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/^usage: chronicle <command> \[options\]/)
    for (const command of ['serve', 'chat', 'show', 'fork', 'audit', 'token', 'verify'])
      expect(r.stdout).toContain(`  ${command}`)
  })

  it.each([['--version'], ['version'], ['-v']])('%s prints the version', async (flag) => {
    expect(await runInProcess([flag])).toMatchObject({ code: 0, stdout: `chronicle ${pkg.version}\n` })
  })

  it.each([
    ['show', '--help', 'usage: chronicle show <session> [--at seq]'],
    ['show', '-h', 'usage: chronicle show <session> [--at seq]'],
    ['chat', '--help', '[--model m]'],
    ['verify', '--help', '--head checks the log still gives one recorded earlier'],
  ])('%s %s is that command’s usage, not an error', async (command, flag, line) => {
    const r = await runInProcess([command, flag])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain(line)
    expect(r.stdout).not.toContain('  sessions [--archived]') // only the command asked about
  })

  it('an unknown flag is one clear line and the command’s usage, exit 2', async () => {
    const r = await runInProcess(['sessions', '--archivd'])
    expect(r.code).toBe(2)
    expect(r.stderr).toBe(
      'chronicle: unknown flag --archivd for sessions (it takes --archived)\nusage: chronicle sessions [--archived]                         list sessions\n',
    )
  })

  it('an unknown command names itself and where the list is', async () => {
    const r = await runInProcess(['shwo'])
    expect([r.code, r.stderr]).toEqual([2, 'chronicle: unknown command shwo; chronicle --help lists them\n'])
  })

  it('a child process answers --version, and a bad flag with exit 2', async () => {
    const r = await runToEnd(['--version'], {})
    expect([r.code, r.stdout]).toEqual([0, `chronicle ${pkg.version}\n`])
    const bad = await runToEnd(['show', 'ses_x', '--at'], {})
    expect([bad.code, bad.stderr.split('\n')[0]]).toEqual([2, 'chronicle: --at needs a value'])
  })

  it('a flag given a value it does not take, or one missing its value, is one clear line', async () => {
    expect((await runInProcess(['revert', 's', '--force=yes'])).stderr.split('\n')[0]).toBe(
      'chronicle: --force takes no value',
    )
    expect((await runInProcess(['fork', 's', '--at'])).stderr.split('\n')[0]).toBe('chronicle: --at needs a value')
  })
})
