import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { loadConfig } from '../config.js'
import { createChronicle } from '../main.js'
import { ChronicleSocket } from '../client/socket.js'
import { LiveRenderer } from './live.js'
import { renderTranscript } from './render.js'
import type { Terminal } from './terminal.js'

/**
 * `chronicle demo`: a temporary server with the scripted model in a temp
 * directory (no API key). It plays a short session that reads a file and
 * answers, shows the transcript at an earlier seq, then forks there and
 * takes the fork somewhere else — all through the client protocol.
 */

const NOTES = 'Chronicle records every model delta, tool call and permission as an event in one SQLite log.\n'

const SCRIPT = {
  chunkSize: 6,
  delayMs: 15,
  steps: [
    {
      when: { afterToolResult: false, userContains: 'notes.txt' },
      text: 'Let me read the file.',
      toolCalls: [{ id: 'call_demo_1', name: 'read', input: { filePath: 'notes.txt' } }],
    },
    {
      when: { afterToolResult: true },
      text: 'notes.txt says that Chronicle records every model delta, tool call and permission as an event in a single SQLite log.',
    },
    { when: { userContains: 'shorter' }, text: 'Everything is an event.' },
  ],
}

export async function demo(term: Terminal): Promise<number> {
  const out = term.line
  const root = mkdtempSync(join(tmpdir(), 'chronicle-demo-'))
  const project = join(root, 'project')
  mkdirSync(project)
  writeFileSync(join(project, 'notes.txt'), NOTES)
  const script = join(root, 'script.json')
  writeFileSync(script, JSON.stringify(SCRIPT))
  const config = loadConfig({
    env: {
      CHRONICLE_DATA_DIR: join(root, 'data'),
      CHRONICLE_PORT: '0',
      CHRONICLE_MODEL: `scripted:${script}`,
      CHRONICLE_LOG_LEVEL: 'warn',
    },
    configPath: false, // the demo is self-contained: the user's own config file plays no part
  })
  const quiet = new Writable({ write: (_c, _e, done) => done() })
  const chronicle = await createChronicle(config, { directory: project, logDestination: quiet })
  const url = await chronicle.start()
  out(`demo server on ${url} (scripted model, data in ${root})`)
  const client = await ChronicleSocket.connect({ url, token: chronicle.token.token })
  try {
    let onEvent: (session: string, seq: number, type: string, data: Record<string, unknown>) => void = () => {}
    const ask = async (session: string, text: string) => {
      const finished = new Promise<number>((resolve) => {
        const renderer = new LiveRenderer(term, { onRunFinished: (_outcome, seq) => resolve(seq) })
        onEvent = (from, seq, type, data) => from === session && renderer.handle({ seq, type, data })
      })
      out(`\n${term.paint(['bold', 'green'], '> user:')} ${text}`)
      await client.call('input.submit', { session, parts: [{ type: 'text', text }] })
      return finished
    }

    const { session } = await client.call('session.create', {
      directory: project,
      title: 'demo: read a file',
    })
    await client.subscribe({ sessions: '*', after: chronicle.store.head() }, (frame) =>
      onEvent(frame.session, frame.seq, frame.event.type, frame.event.data),
    )
    await ask(session.id, 'What does notes.txt say?')

    out('\n── transcript ──')
    out(renderTranscript(await client.call('session.state', { session: session.id }), term.paint))

    const history = await client.call('session.history', {
      session: session.id,
      limit: 5000,
    })
    const earlier = history.events.find((e) => e.type === 'tool.completed')?.seq ?? 1
    out(`\n── the same session at seq ${earlier} (the file was read; the answer not yet written) ──`)
    out(renderTranscript(await client.call('session.state', { session: session.id, at: earlier }), term.paint))

    const { session: child } = await client.call('session.fork', {
      session: session.id,
      at: earlier,
      title: 'demo: fork',
    })
    out(`\n── forked at seq ${earlier} → ${child.id}; the fork goes its own way ──`)
    await ask(child.id, 'Say it shorter.')
    out('\n── the fork ──')
    out(renderTranscript(await client.call('session.state', { session: child.id }), term.paint))
    const parent = await client.call('session.state', { session: session.id })
    out(`\nthe original is untouched: ${parent.messages.length} messages, last seq ${parent.seq}`)
    return 0
  } finally {
    client.close()
    await chronicle.stop()
    rmSync(root, { recursive: true, force: true })
  }
}
