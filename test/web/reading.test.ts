import { rmSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { afterAll, describe, expect, it } from 'vitest'
import type { Script } from '../../src/runtime/model/scripted-model.js'
import {
  buildPage,
  launch,
  prepare,
  type Served,
  screenshot,
  sendMessage,
  serve,
  tempDir,
  watchProblems,
} from './helpers.js'

/**
 * Reading a session in a real Chromium (docs/WEB.md "Reading"): the model's
 * Markdown rendered — and its hostile parts inert — code highlighted with a
 * copy button, tool outputs folded with their size, bash without its
 * metadata block and with its exit code as a badge, a call waiting for
 * approval shown as waiting, usage and cost per step and per session. The
 * attacker writes the model's text, the command's output and a file name.
 * Every test also fails on a script error or a CSP violation.
 */

const PWNED = 'window.__pwned'
const HOSTILE = [
  '# Plan',
  '',
  'Some **bold** and `inline <code>` and a [safe link](https://example.com/a?b=1).',
  '',
  '- [x] done item',
  '- second item',
  '',
  '| name | size |',
  '|:-----|-----:|',
  '| a.ts | 12 |',
  '',
  '```ts',
  'const answer: number = 42 // the answer',
  '```',
  '',
  `<script>${PWNED} = 'script'</script>`,
  '',
  `An image tag <img src="x" onerror="${PWNED}='img'"> inline, a [javascript link](javascript:${PWNED}='link'),`,
  `a <a href="javascript:${PWNED}='a'">raw anchor</a>, ![tracker](https://example.com/pixel.png) and`,
  '<style>body { display: none }</style> <iframe src="https://example.com"></iframe>',
].join('\n')

const HUGE = 'x'.repeat(5 * 1024 * 1024)
const FILE_NAME = '<img src=x onerror=alert(1)>.txt'
const COMMAND = `printf '<img src=x onerror="${PWNED}=1">\\n'; seq 1 40; exit 3`

const SCRIPT: Script = {
  chunkSize: 512 * 1024,
  steps: [
    { when: { userContains: 'markdown' }, text: HOSTILE, usage: { input: 1200, output: 340 } },
    { when: { userContains: 'huge' }, text: HUGE },
    {
      when: { userContains: 'run bash', afterToolResult: false },
      toolCalls: [{ id: 'call_bash', name: 'bash', input: { command: COMMAND, description: 'count to forty' } }],
    },
    { when: { userContains: 'run bash', afterToolResult: true }, text: 'Counted.' },
    {
      when: { userContains: 'write it', afterToolResult: false },
      toolCalls: [{ id: 'call_write', name: 'write', input: { filePath: FILE_NAME, content: 'hello\n' } }],
    },
    { when: { userContains: 'write it', afterToolResult: true }, text: 'Written.' },
  ],
}

let dir: string
let root: string
let browser: Browser
let server: Served
let page: Page
const problems: string[] = []

prepare(async () => {
  dir = tempDir('reading')
  root = buildPage()
  browser = await launch()
  const scriptFile = join(dir, `script-${process.pid}.json`) // the file serve() writes the script to
  server = await serve({
    data: join(dir, 'data'),
    directory: join(dir, 'work'),
    root,
    script: SCRIPT,
    config: { models: { [`scripted:${scriptFile}`]: { inputPrice: 3, outputPrice: 15 } } },
  })
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url })
  page = await context.newPage()
  watchProblems(page, problems)
  page.on('dialog', (d) => {
    problems.push(`dialog: ${d.message()}`)
    void d.dismiss()
  })
  await page.goto(server.chronicle.loginLink().url)
  await page.getByRole('heading', { level: 1, name: 'Sessions' }).waitFor()
  await page.getByLabel('Title (optional)').fill('reading')
  await page.getByRole('button', { name: 'New session' }).click()
  await page.getByRole('heading', { level: 1, name: 'reading' }).waitFor()
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await server?.stop()
  rmSync(dir, { recursive: true, force: true })
  rmSync(root, { recursive: true, force: true })
})

async function noHarm(): Promise<void> {
  expect(await page.evaluate(() => (window as unknown as { __pwned?: unknown }).__pwned)).toBeUndefined()
  expect(problems).toEqual([])
}

const transcript = () => page.getByRole('region', { name: 'Transcript' })
const lastAssistant = () =>
  transcript()
    .getByRole('article', { name: /^Assistant/ })
    .last()

describe('the model’s Markdown', () => {
  it('renders headings, emphasis, lists, tables and links; its HTML, scripts and javascript: links are inert text', async () => {
    await sendMessage(page, 'markdown please')
    const answer = lastAssistant()
    await answer.getByRole('heading', { name: 'Plan' }).waitFor()
    await page.getByRole('status').filter({ hasText: /^Idle/ }).waitFor()

    expect(await answer.locator('strong', { hasText: 'bold' }).count()).toBe(1)
    expect(await answer.getByRole('listitem').allTextContents()).toEqual(['☑ done item', 'second item'])
    expect(await answer.getByRole('columnheader').allTextContents()).toEqual(['name', 'size'])
    expect(await answer.getByRole('cell').allTextContents()).toEqual(['a.ts', '12'])

    const safe = answer.getByRole('link', { name: 'safe link' })
    expect(await safe.getAttribute('href')).toBe('https://example.com/a?b=1')
    expect(await safe.getAttribute('rel')).toBe('noopener noreferrer')
    expect(await safe.getAttribute('target')).toBe('_blank')

    // the attacker's parts: shown as the text they are, none of them an element
    const text = (await answer.textContent()) ?? ''
    expect(text).toContain(`<script>${PWNED} = 'script'</script>`)
    expect(text).toContain(`<img src="x" onerror="${PWNED}='img'">`)
    expect(text).toContain('<style>body { display: none }</style>')
    expect(text).toContain(`[javascript link](javascript:${PWNED}='link')`)
    expect(await answer.locator('script, img, style, iframe, [onerror], [style]').count()).toBe(0)
    const hrefs = await page.locator('.transcript a').evaluateAll((as) => as.map((a) => a.getAttribute('href') ?? ''))
    expect(hrefs.filter((h) => !/^(https?:|mailto:|#\/)/.test(h))).toEqual([])
    // an image is a link that loads nothing
    const image = answer.getByRole('link', { name: 'image: tracker' })
    expect(await image.getAttribute('href')).toBe('https://example.com/pixel.png')
    expect(await page.locator('body').isVisible()).toBe(true)
    await noHarm()
  })

  it('highlights a code block, names its language and copies its text', async () => {
    const block = lastAssistant().locator('.code-block')
    expect(await block.locator('.code-lang').textContent()).toBe('ts')
    expect(await block.locator('pre code').textContent()).toBe('const answer: number = 42 // the answer')
    // the highlighter is a chunk of its own, loaded when a code block first needs it (plain until then)
    await block.locator('pre.hljs').waitFor()
    expect(await block.locator('pre code').textContent()).toBe('const answer: number = 42 // the answer')
    // highlight.js's tokens as spans: the keyword, the number, the comment
    expect(await block.locator('.hljs-keyword').allTextContents()).toContain('const')
    expect(await block.locator('.hljs-number').allTextContents()).toEqual(['42'])
    expect(await block.locator('.hljs-comment').allTextContents()).toEqual(['// the answer'])
    await block.getByRole('button', { name: 'Copy ts code' }).click()
    await block.getByRole('status').filter({ hasText: 'Copied' }).waitFor()
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe('const answer: number = 42 // the answer')
    await screenshot(page, 'reading-markdown')
    await noHarm()
  })

  it('shows usage and cost per step and for the session', async () => {
    // 1,200 in at $3 and 340 out at $15 a million tokens: $0.0087
    const step = lastAssistant().locator('.step-finish')
    expect(await step.textContent()).toBe('finished: stop · 1,200 in / 340 out tokens · $0.0087')
    const facts = page.locator('.session-usage')
    expect(await facts.textContent()).toBe(' · 1,200 in / 340 out tokens · $0.0087')
  })

  it('shows a 5 MB single line as plain text, its first 64 KB until asked, and stays responsive', async () => {
    await sendMessage(page, 'huge')
    const answer = lastAssistant()
    await answer.getByText('A long text (5.0 MB), shown as plain text: its first 64.0 KB.').waitFor({ timeout: 60_000 })
    await page.getByRole('status').filter({ hasText: /^Idle/ }).waitFor({ timeout: 60_000 })
    expect(((await answer.locator('.plain').textContent()) ?? '').length).toBe(64 * 1024 + 1)
    const started = Date.now()
    expect(await page.evaluate(() => 1 + 1)).toBe(2)
    expect(Date.now() - started).toBeLessThan(1000)
    await answer.getByRole('button', { name: 'Show all' }).click()
    await expect.poll(async () => ((await answer.locator('.plain').textContent()) ?? '').length).toBe(HUGE.length)
    await noHarm()
  })
})

describe('tool calls', () => {
  it('shows bash output without its metadata block, the exit code as a badge, a long output folded with its size', async () => {
    await sendMessage(page, 'run bash')
    const tool = transcript().locator('.part.tool').last()
    await tool.getByText('waiting for approval').waitFor({ timeout: 30_000 })
    await page.getByRole('button', { name: 'Allow once' }).click()
    await transcript().getByText('Counted.').waitFor({ timeout: 30_000 })
    expect(await tool.locator('.badge').allTextContents()).toEqual(['completed', 'exit 3'])
    const fold = tool.getByText(/^Output \(41 lines, \d+ B\)$/)
    await fold.waitFor()
    expect(await tool.locator('pre.output').count()).toBe(0) // folded: not even drawn
    await fold.click()
    const output = (await tool.locator('pre.output').textContent()) ?? ''
    expect(output.split('\n')).toEqual([
      `<img src=x onerror="${PWNED}=1">`,
      ...Array.from({ length: 40 }, (_, i) => String(i + 1)),
    ])
    expect(output).not.toContain('bash_metadata')
    expect(await tool.textContent()).not.toContain('bash_metadata')
    expect(await tool.locator('img').count()).toBe(0)
    await screenshot(page, 'reading-bash')
    await noHarm()
  })

  it('shows a call waiting for approval as waiting, then completed; a hostile file name is text', async () => {
    await sendMessage(page, 'write it')
    const tool = transcript().locator('.part.tool').last()
    await tool.getByText('waiting for approval').waitFor({ timeout: 30_000 })
    await page.getByRole('button', { name: 'Allow once' }).click()
    await tool.locator('.badge', { hasText: 'completed' }).waitFor({ timeout: 30_000 })
    await transcript().getByText('Written.').waitFor()
    const files = transcript().locator('.part.patch').last()
    expect(await files.locator('code').first().textContent()).toBe(FILE_NAME)
    expect(await transcript().locator('img').count()).toBe(0)
    await noHarm()
  })
})
