import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { LanguageModelV3StreamPart } from '@ai-sdk/provider'
import { convertArrayToReadableStream, MockLanguageModelV3 } from 'ai/test'
import { harness } from '../runtime/helpers.js'
import { afterEach, describe, expect, it } from 'vitest'
import type { InputPart } from '../../src/events/catalogue.js'
import type { openStore } from '../../src/projections/open.js'
import type { ModelHandle } from '../../src/runtime/model/adapter.js'
import type { Runtime } from '../../src/runtime/runtime.js'
import { appendedHead } from '../events/fixtures/store.js'

/**
 * Files attached by path are read at submit (docs/API.md "Files"). The path
 * is hostile input: anything outside the session directory, Chronicle's own
 * data, a directory, a file too large or of a type no model reads is a clear
 * error, and nothing is appended. What is read goes to the model as its
 * media type and the model's capabilities allow.
 */

const PIXEL = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=='
const finish: LanguageModelV3StreamPart = {
  type: 'finish',
  finishReason: { unified: 'stop', raw: 'stop' },
  usage: {
    inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: 1, text: 1, reasoning: 0 },
  },
}

interface World {
  runtime: Runtime
  store: ReturnType<typeof openStore>
  model: MockLanguageModelV3
  directory: string
  data: string
  session: string
}
let world: World | undefined
afterEach(async () => {
  await world?.runtime.stop()
  world?.store.close()
  world = undefined
})

function setup(accepts?: ModelHandle['accepts']): World {
  const root = mkdtempSync(join(tmpdir(), 'chronicle-attach-'))
  const directory = join(root, 'work')
  const data = join(directory, '.chronicle-data') // a data dir that a careless config put inside the workspace
  mkdirSync(data, { recursive: true })
  writeFileSync(join(data, 'token'), 'secret-token')
  writeFileSync(join(root, 'outside.txt'), 'not yours')
  writeFileSync(join(directory, 'notes.txt'), 'remember the milk\n')
  writeFileSync(join(directory, 'pixel.png'), Buffer.from(PIXEL, 'base64'))
  writeFileSync(join(directory, 'README'), 'plain words, no extension\n')
  writeFileSync(join(directory, 'blob.bin'), Buffer.from([0xff, 0xfe, 0x00, 0x80, 0xc3]))
  writeFileSync(join(directory, 'archive.zip'), Buffer.from('PK\u0003\u0004'))
  writeFileSync(join(directory, 'big.txt'), 'x'.repeat(2048))
  mkdirSync(join(directory, 'src'))
  symlinkSync(join(root, 'outside.txt'), join(directory, 'link.txt'))
  const model = new MockLanguageModelV3({ doStream: { stream: convertArrayToReadableStream([finish]) } })
  const handle: ModelHandle = { spec: 'mock:model', model, ...(accepts && { accepts }) }
  const h = harness({
    models: { validate() {}, resolve: () => handle },
    tools: [],
    forbidden: [data],
    limits: { maxFileBytes: 1024 },
    directory,
  })
  return { runtime: h.runtime, store: h.store, model, directory, data, session: h.session() }
}

const file = (path: string, more: Partial<InputPart> = {}): InputPart[] => [
  { type: 'text', text: 'look' },
  { type: 'file', path, ...more } as InputPart,
]

describe('a file given by path', () => {
  it('is read at submit, kept as a blob, and sent inline as text', async () => {
    world = setup()
    const { runtime, store, model, session } = world
    await runtime.submit(session, { parts: file('notes.txt') })
    await runtime.idle(session)
    const accepted = store.readSession(session).find((e) => e.type === 'input.accepted')
    if (accepted?.type !== 'input.accepted') throw new Error('no input.accepted')
    const part = accepted.data.parts[1]
    expect(part).toMatchObject({ type: 'file', path: 'notes.txt', mediaType: 'text/plain', size: 18, encoding: 'utf8' })
    expect(store.blobs.get((part as { blob: string }).blob)).toBe('remember the milk\n')
    expect(model.doStreamCalls[0]?.prompt[1]).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: 'look' },
        { type: 'text', text: '<file path="notes.txt" type="text/plain">\nremember the milk\n\n</file>' },
      ],
    })
  })

  it.each([
    [
      'an image, to a model that takes images',
      'pixel.png',
      undefined,
      { type: 'file', mediaType: 'image/png', data: PIXEL },
    ],
    [
      'an image, to a model that reads text only: a note',
      'pixel.png',
      [] as const,
      { type: 'text', text: '[attached file: pixel.png (image/png, 70 bytes); this model does not take images]' },
    ],
    [
      'a file of unknown type that is UTF-8: as text',
      'README',
      undefined,
      { type: 'text', text: '<file path="README" type="text/plain">\nplain words, no extension\n\n</file>' },
    ],
  ])('%s', async (_, path, accepts, sent) => {
    world = setup(accepts)
    const { runtime, model, session } = world
    await runtime.submit(session, { parts: file(path) })
    await runtime.idle(session)
    const content = model.doStreamCalls[0]?.prompt[1]?.content as unknown[]
    expect(content[1]).toMatchObject(sent)
  })

  it.each([
    ['a path outside the session directory', '../outside.txt', 'FILE_FORBIDDEN'],
    ['an absolute path outside it', '/etc/passwd', 'FILE_FORBIDDEN'],
    ['a symlink inside pointing outside', 'link.txt', 'FILE_FORBIDDEN'],
    ["Chronicle's data dir inside the workspace", '.chronicle-data/token', 'FILE_FORBIDDEN'],
    ['a missing file', 'nope.txt', 'FILE_NOT_FOUND'],
    ['a directory', 'src', 'NOT_A_FILE'],
    ['a file over the size cap', 'big.txt', 'PAYLOAD_TOO_LARGE'],
    ['binary of unknown type', 'blob.bin', 'UNSUPPORTED_MEDIA_TYPE'],
    ['a binary type no model reads', 'archive.zip', 'UNSUPPORTED_MEDIA_TYPE'],
  ])('refuses %s with %s, appending nothing', async (_, path, code) => {
    world = setup()
    const { runtime, store, session } = world
    const head = store.head()
    await expect(runtime.submit(session, { parts: file(path) })).rejects.toThrow(expect.objectContaining({ code }))
    expect(appendedHead(store)).toBe(head)
  })

  it('refuses a client that names a blob itself (another file of the store) with BAD_REQUEST', async () => {
    world = setup()
    const { runtime, store, session } = world
    const secret = store.blobs.put('another session’s file')
    await expect(
      runtime.submit(session, { parts: [{ type: 'file', filename: 'x', blob: secret, encoding: 'utf8', size: 1 }] }),
    ).rejects.toThrow(expect.objectContaining({ code: 'BAD_REQUEST' }))
  })

  it('a resubmission of the same input is answered from the log, even after the file changed', async () => {
    world = setup()
    const { runtime, session, directory } = world
    const first = await runtime.submit(session, { inputId: 'in_once', parts: file('notes.txt') })
    await runtime.idle(session)
    writeFileSync(join(directory, 'notes.txt'), 'something else')
    const again = await runtime.submit(session, { inputId: 'in_once', parts: file('notes.txt') })
    expect(again).toEqual({ ...first, duplicate: true })
  })
})
