import { describe, expect, it } from 'vitest'
import { runToEnd } from './helpers.js'

/** `chronicle demo` as a user runs it: a real process, no API key, no configuration. */

describe('chronicle demo', () => {
  it('plays a scripted session, shows it at an earlier seq and forks there, with no API key', async () => {
    const res = await runToEnd(['demo'], { CHRONICLE_LOG_LEVEL: 'warn' })
    expect(res.code).toBe(0)
    const out = res.stdout
    expect(out).toMatch(/^demo server on http:\/\/127\.0\.0\.1:\d+ \(scripted model/)
    expect(out).toContain('> user: What does notes.txt say?')
    expect(out).toContain('⚙ read {"filePath":"notes.txt"} — running')
    expect(out).toContain('✓ read — completed')
    expect(out).toMatch(
      /── the same session at seq (\d+) \(the file was read; the answer not yet written\) ──\n# demo: read a file \(ses_\w+\) at seq \1 — busy/,
    )
    expect(out).toMatch(/── forked at seq \d+ → ses_\w+; the fork goes its own way ──/)
    expect(out).toContain('> user: Say it shorter.\n< assistant')
    expect(out).toContain('  Everything is an event.')
    expect(out).toMatch(/the original is untouched: 3 messages, last seq \d+\n$/)
  }, 90_000)
})
