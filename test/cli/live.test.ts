import { describe, expect, it } from 'vitest'
import { LiveRenderer, type PermissionAsk } from '../../src/cli/live.js'
import { describeInput } from '../../src/cli/render.js'
import { painter } from '../../src/cli/terminal.js'

/** What chat and run print as a session's events stream. */

function renderer(colours = false, width?: number) {
  let out = ''
  const asks: PermissionAsk[] = []
  const closed: string[] = []
  const live = new LiveRenderer(
    { write: (t) => void (out += t), paint: painter(colours), width },
    { onPermission: (r) => asks.push(r), onPermissionClosed: (id) => closed.push(id) },
  )
  return { live, out: () => out, asks, closed }
}

describe('LiveRenderer', () => {
  it('shows an edit approval’s diff, added lines green and removed red, before the question', () => {
    const r = renderer(true)
    r.live.handle({
      seq: 9,
      type: 'permission.requested',
      data: {
        requestId: 'per_1',
        permission: 'edit',
        patterns: ['a.txt'],
        metadata: { diff: '--- a.txt\n+++ a.txt\n@@ -1 +1 @@\n-two\n+TWO\n' },
      },
    })
    expect(r.out()).toBe(
      '\u001b[1m--- a.txt\u001b[22m\n\u001b[1m+++ a.txt\u001b[22m\n\u001b[36m@@ -1 +1 @@\u001b[39m\n\u001b[31m-two\u001b[39m\n\u001b[32m+TWO\u001b[39m\n',
    )
    expect(r.asks.map((a) => a.requestId)).toEqual(['per_1'])
  })

  it('shows a hostile file’s or model’s terminal escapes as text, never obeys them', () => {
    const r = renderer()
    const clear = '\u001b[2J\u001b]0;owned\u0007'
    r.live.handle({
      seq: 9,
      type: 'permission.requested',
      data: {
        requestId: 'per_1',
        permission: 'edit',
        patterns: ['a.txt'],
        metadata: { diff: `--- a.txt\n+++ a.txt\n@@ -1 +1 @@\n-two\n+${clear}TWO\r\n` },
      },
    })
    r.live.handle({ seq: 10, type: 'text.delta', data: { text: `done${clear}\rfake prompt> ` } })
    // biome-ignore lint/suspicious/noControlCharactersInRegex: asserting none is left
    expect(r.out()).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f]/)
    expect(r.out()).toContain('+\\x1b[2J\\x1b]0;owned\\x07TWO\n')
    expect(r.out()).toContain('done\\x1b[2J\\x1b]0;owned\\x07\\x0dfake prompt> ')
  })

  it("shows each host a call's command reached or was refused under the call, escapes as text", () => {
    const r = renderer()
    const use = (data: Record<string, unknown>) =>
      r.live.handle({ seq: 11, type: 'tool.network', data: Object.assign({ partId: 'prt_1' }, data) })
    use({ host: 'registry.npmjs.org', port: 443, allowed: true, connections: 3, bytesIn: 3 * 2 ** 20, bytesOut: 2048 })
    use({
      host: 'evil.example',
      port: 80,
      allowed: false,
      connections: 1,
      bytesIn: 0,
      bytesOut: 0,
      reason: 'HOST_NOT_LISTED',
    })
    use({
      host: 'x\u001b[2J',
      port: 443,
      allowed: false,
      connections: 2,
      bytesIn: 0,
      bytesOut: 0,
      reason: 'HOST_DENIED',
    })
    expect(r.out()).toBe(
      [
        '    ↔ registry.npmjs.org:443 ×3 — 3.0 MiB in, 2.0 KiB out',
        '    ⊘ evil.example:80 — refused (HOST_NOT_LISTED)',
        '    ⊘ x\\x1b[2J:443 ×2 — refused (HOST_DENIED)',
        '',
      ].join('\n'),
    )
  })

  it('hands a reply (from anyone) to the caller, so a question answered elsewhere is dropped', () => {
    const r = renderer()
    r.live.handle({ seq: 10, type: 'permission.replied', data: { requestId: 'per_1', reply: 'once' } })
    expect(r.closed).toEqual(['per_1'])
    expect(r.out()).toBe('  permission once\n')
  })

  it('wraps streamed text at word boundaries on a terminal', () => {
    const r = renderer(false, 12)
    for (const text of ['Every fact ', 'is an immu', 'table event.'])
      r.live.handle({ seq: 1, type: 'text.delta', data: { text } })
    r.live.handle({ seq: 2, type: 'text.ended', data: {} })
    expect(
      r
        .out()
        .split('\n')
        .map((l) => l.trimEnd()),
    ).toEqual(['Every fact', 'is an', 'immutable', 'event.', ''])
  })
})

describe('describeInput', () => {
  it('shows a tool input recorded as JSON text decoded, not encoded twice', () => {
    expect(describeInput('{"filePath":"a.txt"}')).toBe('{"filePath":"a.txt"}')
    expect(describeInput({ filePath: 'a.txt' })).toBe('{"filePath":"a.txt"}')
    expect(describeInput('plain words')).toBe('plain words')
  })
})
