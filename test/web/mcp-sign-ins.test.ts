import { describe, expect, it } from 'vitest'
import { isWebUrl } from '../../src/web/views/mcp-sign-ins.js'

/** The authorization URL comes from a remote server's metadata: hostile input before it becomes a link. */
describe('a sign-in URL becomes a link', () => {
  it('only for http and https', () => {
    expect(isWebUrl('https://auth.example.com/authorize?state=x')).toBe(true)
    expect(isWebUrl('http://127.0.0.1:9000/authorize')).toBe(true)
    for (const hostile of [
      'javascript:alert(document.cookie)',
      'JavaScript:alert(1)',
      'data:text/html,<script>alert(1)</script>',
      'vbscript:msgbox(1)',
      'file:///etc/passwd',
      '//evil.example/authorize',
      'not a url',
    ])
      expect(isWebUrl(hostile), hostile).toBe(false)
  })
})
