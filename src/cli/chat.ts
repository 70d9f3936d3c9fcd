import { createInterface } from 'node:readline'
import { flag, type Args } from './args.js'
import { serverInfo, WsClient } from './client.js'
import { LiveRenderer } from './live.js'
import { renderTranscript, type StateView } from './render.js'

/**
 * `chronicle chat [session] [--directory d] [--agent a] [--model m]`: an
 * interactive terminal client over WebSocket. Streams the assistant's text
 * live, shows tool calls with their states, asks permission questions
 * (y / n / a = always), and Ctrl-C cancels the running run (twice: quit).
 */
export async function chat(
  args: Args,
  io: { input: NodeJS.ReadableStream; output: NodeJS.WritableStream },
): Promise<number> {
  // Read stdin from the start: lines typed (or piped) while connecting are kept, not lost.
  const rl = createInterface({
    input: io.input,
    output: io.output,
    terminal: Boolean((io.input as { isTTY?: boolean }).isTTY),
  })
  const early: string[] = []
  let onLine: (line: string) => void = (line) => void early.push(line)
  rl.on('line', (line) => onLine(line))
  const ended = new Promise<number>((resolve) => rl.on('close', () => resolve(0)))
  const client = await WsClient.connect(serverInfo())
  const write = (text: string) => void io.output.write(text)
  let sessionId = args.positionals[0]
  if (!sessionId) {
    const directory = flag(args, 'directory')
    const { session } = await client.call<{ session: { id: string } }>('session.create', {
      ...(directory && { directory: (await import('node:path')).resolve(directory) }),
      ...(flag(args, 'agent') && { agent: flag(args, 'agent') }),
      ...(flag(args, 'model') && { model: flag(args, 'model') }),
    })
    sessionId = session.id
    write(`session ${sessionId}\n`)
  } else {
    const state = await client.call<StateView>('session.state', { session: sessionId })
    write(`${renderTranscript(state)}\n`)
  }
  const session = sessionId
  const state = await client.call<StateView>('session.state', { session })

  let running = false
  const permissions: { requestId: string; permission: string; patterns: string[] }[] = []
  const prompt = () => {
    const next = permissions[0]
    write(
      next ? `? allow ${next.permission} ${next.patterns.join(' ')} — [y]es / [n]o / [a]lways: ` : running ? '' : '> ',
    )
  }
  const renderer = new LiveRenderer({
    write,
    onPermission: (request) => {
      permissions.push(request)
      if (permissions.length === 1) prompt()
    },
    onRunFinished: () => {
      running = false
      prompt()
    },
  })
  client.onFrame = (frame) => {
    if (frame.type !== 'event') return
    const event = frame.event as { type: string; data: Record<string, unknown> }
    if (event.type === 'run.started') running = true
    renderer.handle({ seq: frame.seq as number, type: event.type, data: event.data })
  }
  const closed = Promise.race([ended, new Promise<number>((resolve) => (client.onClose = () => resolve(0)))])
  // Live from here on; pending permission requests of a resumed session are asked again.
  await client.call('subscribe', { sessions: [session], after: state.seq })
  for (const p of state.session.pendingPermissions)
    renderer.handle({ seq: p.seq, type: 'permission.requested', data: { ...p } })
  prompt()

  let interrupts = 0
  const onInterrupt = () => {
    if (running && interrupts === 0) {
      interrupts++
      write('\n(cancelling — Ctrl-C again to quit)\n')
      void client.call('run.cancel', { session }).catch((err: Error) => write(`${err.message}\n`))
      return
    }
    rl.close()
  }
  rl.on('SIGINT', onInterrupt)
  process.on('SIGINT', onInterrupt)

  onLine = (line) => {
    const text = line.trim()
    const request = permissions[0]
    if (request) {
      const reply = /^a/i.test(text) ? 'always' : /^y/i.test(text) ? 'once' : /^n/i.test(text) ? 'reject' : undefined
      if (!reply) return prompt()
      permissions.shift()
      void client
        .call('permission.reply', { session, requestId: request.requestId, reply })
        .catch((err: Error) => write(`${err.message}\n`))
        .finally(() => permissions.length > 0 && prompt())
      return
    }
    if (text === '') return prompt()
    if (text === '/quit' || text === '/exit') return rl.close()
    interrupts = 0
    running = true
    void client.call('input.submit', { session, parts: [{ type: 'text', text }] }).catch((err: Error) => {
      running = false
      write(`${err.message}\n`)
      prompt()
    })
  }
  for (const line of early.splice(0)) onLine(line)

  const code = await closed
  process.removeListener('SIGINT', onInterrupt)
  client.close()
  return code
}
