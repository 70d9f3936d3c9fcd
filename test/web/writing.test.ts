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
 * Writing in a real Chromium (docs/WEB.md "Writing"): files attached with
 * the picker, by drag and drop and by paste go to the server as file parts,
 * within the input limit the composer shows; a file too large or of a type
 * a model cannot read is refused before it is sent; `/compact`, `/fork` and
 * `/revert` run the session's actions. The attacker names the files.
 */

const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
  'base64',
)
const HOSTILE_NAME = '<img src=x onerror="window.__pwned=1">.png'

const SCRIPT: Script = {
  chunkSize: 64,
  steps: [
    { when: { userContains: 'look at this' }, text: 'A one-pixel picture.' },
    { when: { userContains: 'dropped' }, text: 'Got the drop.' },
    { when: { userContains: 'pasted' }, text: 'Got the paste.' },
    { when: { userContains: 'first' }, text: 'First answer.' },
  ],
}

let dir: string
let root: string
let browser: Browser
let server: Served
let page: Page
let session: string
const problems: string[] = []

type Ev = { seq: number; type: string; data: Record<string, unknown> }
async function events(id: string): Promise<Ev[]> {
  const res = await fetch(`${server.url}/sessions/${id}/events?limit=5000`, {
    headers: { authorization: `Bearer ${server.chronicle.token.token}` },
  })
  return ((await res.json()) as { events: Ev[] }).events
}
const fileParts = async () =>
  (await events(session))
    .filter((e) => e.type === 'input.accepted')
    .flatMap((e) => e.data.parts as { type: string; url?: string; filename?: string; mediaType?: string }[])
    .filter((p) => p.type === 'file')

prepare(async () => {
  dir = tempDir('writing')
  root = buildPage()
  browser = await launch()
  server = await serve({ data: join(dir, 'data'), directory: join(dir, 'work'), root, script: SCRIPT })
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
  page = await context.newPage()
  watchProblems(page, problems)
  await page.goto(server.chronicle.loginLink().url)
  await page.getByRole('heading', { level: 1, name: 'Sessions' }).waitFor()
  await page.getByLabel('Title (optional)').fill('writing')
  await page.getByRole('button', { name: 'New session' }).click()
  await page.waitForURL(/#\/s\/ses_/)
  session = /#\/s\/(ses_[A-Za-z0-9_-]+)/.exec(page.url())?.[1] as string
  await page.getByRole('heading', { level: 1, name: 'writing' }).waitFor()
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await server?.stop()
  rmSync(dir, { recursive: true, force: true })
  rmSync(root, { recursive: true, force: true })
})

async function choose(files: { name: string; mimeType: string; buffer: Buffer }[]): Promise<void> {
  const chooser = page.waitForEvent('filechooser')
  await page.getByRole('button', { name: 'Attach files…' }).click()
  await (await chooser).setFiles(files)
}

/**
 * Drops or pastes files the way the browser delivers them: a DataTransfer on
 * the event. All the deliveries are dispatched in one task, as a quick hand
 * would: each must add to what the one before it added.
 */
async function deliver(...deliveries: { kind: 'drop' | 'paste'; name: string; base64: string }[]): Promise<void> {
  await page.evaluate((deliveries) => {
    const box = document.querySelector('#composer-text') as HTMLElement
    for (const { kind, name, base64 } of deliveries) {
      const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0))
      const transfer = new DataTransfer()
      transfer.items.add(new File([bytes], name, { type: 'image/png' }))
      const event =
        kind === 'drop'
          ? new DragEvent('drop', { dataTransfer: transfer, bubbles: true, cancelable: true })
          : new ClipboardEvent('paste', { clipboardData: transfer, bubbles: true, cancelable: true })
      box.dispatchEvent(event)
    }
  }, deliveries)
}

const attachments = () => page.getByRole('list', { name: 'Attachments' })

describe('attachments', () => {
  it('shows the limit, and sends a picked image as a file part; its hostile name is text', async () => {
    await page.getByText('Images and PDFs: up to 256.0 KB in all.').waitFor()
    await choose([{ name: HOSTILE_NAME, mimeType: 'image/png', buffer: PNG }])
    expect(await attachments().locator('.attachment-name').allTextContents()).toEqual([HOSTILE_NAME])
    await attachments()
      .getByText(/of 256\.0 KB used$/)
      .waitFor()
    await sendMessage(page, 'look at this')
    await page.getByText('A one-pixel picture.').waitFor()
    expect(await fileParts()).toEqual([
      {
        type: 'file',
        url: `data:image/png;base64,${PNG.toString('base64')}`,
        mediaType: 'image/png',
        filename: HOSTILE_NAME,
      },
    ])
    const user = page.getByRole('article', { name: 'owner' }).last()
    expect(await user.locator('.part.file code').textContent()).toBe(HOSTILE_NAME)
    expect(await page.locator('.transcript img').count()).toBe(0)
    expect(await attachments().count()).toBe(0) // sent: the list is empty again
    expect(await page.evaluate(() => (window as unknown as { __pwned?: unknown }).__pwned)).toBeUndefined()
  })

  it('refuses a file over the limit and a type a model cannot read, before anything is sent', async () => {
    const before = (await fileParts()).length
    await choose([{ name: 'big.png', mimeType: 'image/png', buffer: Buffer.alloc(300 * 1024) }])
    await page
      .getByRole('alert')
      .filter({ hasText: /^big\.png is 300\.0 KB: attachments may take .* more \(the input limit is 256\.0 KB\)$/ })
      .waitFor()
    await choose([{ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('hello') }])
    await page
      .getByRole('alert')
      .filter({ hasText: 'notes.txt: only images (PNG, JPEG, GIF, WebP) and PDFs can be attached, not text/plain' })
      .waitFor()
    expect(await attachments().count()).toBe(0)
    expect((await fileParts()).length).toBe(before)
  })

  it('takes a dropped and a pasted image, and one can be removed before sending', async () => {
    await deliver(
      { kind: 'drop', name: 'dropped.png', base64: PNG.toString('base64') },
      { kind: 'paste', name: 'pasted.png', base64: PNG.toString('base64') },
    )
    await attachments().getByText('pasted.png').waitFor()
    expect(await attachments().locator('.attachment-name').allTextContents()).toEqual(['dropped.png', 'pasted.png'])
    await page.getByRole('button', { name: 'Remove pasted.png' }).click()
    await screenshot(page, 'writing-attachments')
    await sendMessage(page, 'dropped')
    await page.getByText('Got the drop.').waitFor()
    expect((await fileParts()).map((p) => p.filename)).toEqual([HOSTILE_NAME, 'dropped.png'])
  })
})

describe('slash commands', () => {
  it('lists the commands as one types a slash; a malformed one is refused with its usage', async () => {
    await page.getByLabel('Message', { exact: true }).fill('/')
    expect(await page.locator('#composer-hint kbd').allTextContents()).toEqual([
      '/compact',
      '/fork [seq]',
      '/revert [seq]',
    ])
    await page.getByLabel('Message', { exact: true }).fill('/re')
    expect(await page.locator('#composer-hint kbd').allTextContents()).toEqual(['/revert [seq]'])
    await sendMessage(page, '/revert yesterday')
    await page
      .getByRole('alert')
      .filter({ hasText: '/revert takes a seq (a positive whole number), not "yesterday"' })
      .waitFor()
  })

  it('/compact asks for a compaction: compaction.requested is in the log at the seq it names', async () => {
    await sendMessage(page, '/compact')
    const said = page.getByText(/^Compaction requested \(seq \d+\)\.$/)
    await said.waitFor()
    const seq = Number(/seq (\d+)/.exec((await said.textContent()) ?? '')?.[1])
    expect((await events(session)).find((e) => e.seq === seq)?.type).toBe('compaction.requested')
  })

  it('/revert without a seq opens the scrubber; /fork forks at the latest event and opens the child', async () => {
    await sendMessage(page, '/revert')
    await page.waitForURL(new RegExp(`#/s/${session}@$`))
    await page.goto(`${server.url}/#/s/${session}`)
    await page.getByRole('heading', { level: 1, name: 'writing' }).waitFor()
    await sendMessage(page, '/fork')
    await page.waitForURL((url) => /#\/s\/ses_/.test(url.hash) && !url.hash.includes(session))
    await page.getByText('fork of').waitFor()
    const child = /#\/s\/(ses_[A-Za-z0-9_-]+)/.exec(page.url())?.[1] as string
    const res = await fetch(`${server.url}/sessions/${child}`, {
      headers: { authorization: `Bearer ${server.chronicle.token.token}` },
    })
    const forked = ((await res.json()) as { session: { forkedFrom: { sessionId: string } | null } }).session.forkedFrom
    expect(forked?.sessionId).toBe(session)
    expect(problems).toEqual([])
  })
})
