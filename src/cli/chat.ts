import { randomUUID } from 'node:crypto'
import { createInterface } from 'node:readline'
import type { CliIo } from '../cli.js'
import type { Args } from './args.js'
import { connect } from './client.js'
import { ElicitationForm } from './elicit.js'
import { LiveRenderer, type PermissionAsk } from './live.js'
import { chooseSession } from './pick.js'
import { printable, renderTranscript } from './render.js'

/**
 * `chronicle chat [session] [--continue] [--directory d] [--agent a] [--model m]`:
 * an interactive terminal client over WebSocket. Streams the assistant's
 * text live, shows tool calls with their states, asks permission questions
 * (y / n / a = always) and tool servers' questions (their form's fields one
 * line at a time, src/cli/elicit.ts), and drops a question once the server
 * records its answer or the run ends. Ctrl-C cancels the running run (twice: quit).
 * When stdin ends (a pipe, or Ctrl-D), chat waits for the answers to what
 * it sent before it exits.
 */
export async function chat(args: Args, io: CliIo): Promise<number> {
  const term = io.stdout
  const interactive = Boolean(io.stdin.isTTY)
  // Read stdin from the start: lines typed (or piped) while connecting are kept, not lost.
  const rl = createInterface({
    input: io.stdin,
    ...(interactive && { output: process.stdout }),
    terminal: interactive,
  })
  const early: string[] = []
  let onLine: (line: string) => void = (line) => void early.push(line)
  rl.on('line', (line) => onLine(line))
  let inputEnded = false
  let onEnd = () => {}
  rl.on('close', () => {
    inputEnded = true
    onEnd()
  })
  let quit: (code: number) => void = () => {}
  const done = new Promise<number>((resolve) => (quit = resolve))

  let lost = false
  const socket = await connect({
    onStatus: (status, reason) => {
      if (status === 'reconnecting' && !lost)
        term.line(term.paint('yellow', `(connection lost: ${reason}; reconnecting…)`))
      if (status === 'open' && lost) term.line(term.paint('dim', '(reconnected)'))
      lost = status === 'reconnecting'
      if (status === 'closed') {
        term.line(term.paint('red', `(connection closed: ${reason})`))
        quit(1)
      }
    },
  })
  const chosen = await chooseSession(args, socket, {
    ...(args.positionals[0] && { named: args.positionals[0] }),
    term,
    ...(interactive && { ask: rl }),
  })
  const session = chosen.id
  const state = await socket.call('session.state', { session })
  term.line(chosen.created ? `session ${session}` : renderTranscript(state, term.paint))

  let running = state.session.run !== null
  /** inputs sent and not yet delivered to a run: stdin's end waits for them */
  const outstanding = new Set<string>()
  const permissions: PermissionAsk[] = []
  /** tool servers' questions, asked after the permission requests */
  const questions: ElicitationForm[] = []
  const prompt = () => {
    const next = permissions[0]
    const question = questions[0]
    if (next)
      term.write(
        term.paint(
          ['bold', 'yellow'],
          `? allow ${next.permission} ${next.patterns.join(' ')} — [y]es / [n]o / [a]lways: `,
        ),
      )
    else if (question) term.write(term.paint('yellow', printable(question.prompt())))
    else if (!running && !inputEnded) term.write(term.paint('bold', '> '))
  }
  const settled = () =>
    inputEnded && !running && outstanding.size === 0 && permissions.length === 0 && questions.length === 0
  const closeRequest = (requestId: string) => {
    const index = permissions.findIndex((p) => p.requestId === requestId)
    if (index < 0) return
    permissions.splice(index, 1)
    if (index === 0) term.write(term.paint('dim', '\n(that question was answered or closed)\n'))
    prompt()
  }
  const closeQuestion = (elicitationId: string) => {
    const index = questions.findIndex((q) => q.ask.elicitationId === elicitationId)
    if (index < 0) return
    questions.splice(index, 1)
    if (index === 0 && permissions.length === 0)
      term.write(term.paint('dim', '\n(that question was answered or closed)\n'))
    prompt()
  }
  const renderer = new LiveRenderer(term, {
    onPermission: (request) => {
      if (permissions.some((p) => p.requestId === request.requestId)) return
      permissions.push(request)
      if (permissions.length === 1) prompt()
    },
    onPermissionClosed: closeRequest,
    onElicitation: (question) => {
      if (questions.some((q) => q.ask.elicitationId === question.elicitationId)) return
      questions.push(new ElicitationForm(question))
      if (permissions.length === 0 && questions.length === 1) prompt()
    },
    onElicitationClosed: closeQuestion,
    onRunFinished: () => {
      running = false
      // a run that ended has no open question left (a cancel settles them)
      for (const p of [...permissions]) closeRequest(p.requestId)
      for (const q of [...questions]) closeQuestion(q.ask.elicitationId)
      if (settled()) quit(0)
      else prompt()
    },
  })
  // Live from the state's seq on; the pending questions of a resumed session are asked again.
  await socket.subscribe({ sessions: [session], after: state.seq }, (frame) => {
    const { type, data } = frame.event
    if (type === 'run.started') running = true
    if (type === 'input.delivered') outstanding.delete(String(data.inputId))
    renderer.handle({ seq: frame.seq, type, data })
  })
  for (const p of state.session.pendingPermissions)
    renderer.handle({ seq: p.seq, type: 'permission.requested', data: { ...p } })
  for (const q of state.session.pendingElicitations ?? [])
    renderer.handle({ seq: q.seq, type: 'elicitation.requested', data: { ...q } })
  prompt()

  let interrupts = 0
  const onInterrupt = () => {
    if (running && interrupts === 0) {
      interrupts++
      term.write('\n(cancelling — Ctrl-C again to quit)\n')
      void socket.call('run.cancel', { session }).catch((err: Error) => term.line(err.message))
      return
    }
    quit(130)
  }
  rl.on('SIGINT', onInterrupt)
  process.on('SIGINT', onInterrupt)
  onEnd = () => settled() && quit(0)

  onLine = (line) => {
    const text = line.trim()
    const request = permissions[0]
    if (request) {
      const reply = /^a/i.test(text) ? 'always' : /^y/i.test(text) ? 'once' : /^n/i.test(text) ? 'reject' : undefined
      if (!reply) return prompt()
      permissions.shift()
      void socket
        .call('permission.reply', { session, requestId: request.requestId, reply })
        .catch((err: Error) => term.line(term.paint('red', err.message)))
        .finally(() => permissions.length > 0 && prompt())
      return
    }
    const question = questions[0]
    if (question) {
      const step = question.take(line)
      if ('prompt' in step) {
        if (step.error) term.line(term.paint('red', `  ${printable(step.error)}`))
        return prompt()
      }
      questions.shift()
      void socket
        .call('elicitation.answer', { session, elicitationId: question.ask.elicitationId, ...step.answer })
        .then(
          () => prompt(),
          (err: Error & { code?: string }) => {
            term.line(term.paint('red', err.message))
            // refused as given (ELICITATION_INVALID): the form starts again; otherwise the question is gone
            if (err.code !== 'ELICITATION_INVALID') return prompt()
            question.restart()
            questions.unshift(question)
            prompt()
          },
        )
      return
    }
    if (text === '') return prompt()
    if (text === '/quit' || text === '/exit') return quit(0)
    interrupts = 0
    running = true
    // a client-chosen id: sent again after a reconnect, the server keeps one copy
    const inputId = `in_${randomUUID()}`
    outstanding.add(inputId)
    socket.call('input.submit', { session, inputId, parts: [{ type: 'text', text }] }).catch((err: Error) => {
      outstanding.delete(inputId)
      running = false
      term.line(term.paint('red', err.message))
      if (settled()) quit(1)
      else prompt()
    })
  }
  for (const line of early.splice(0)) onLine(line)
  if (inputEnded) onEnd()

  const code = await done
  process.removeListener('SIGINT', onInterrupt)
  rl.close()
  socket.close()
  return code
}
