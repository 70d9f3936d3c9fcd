import { randomUUID } from 'node:crypto'
import type { CliIo } from '../cli.js'
import { expandPatterns } from '../tools/permission/bash-patterns.js'
import { wildcardMatch } from '../tools/permission/wildcard.js'
import { type Args, flag, listFlag, UsageError } from './args.js'
import { connect } from './client.js'
import { LiveRenderer, type PermissionAsk } from './live.js'
import { chooseSession } from './pick.js'
import { printable } from './render.js'
import { StreamWrapper } from './terminal.js'

/**
 * `chronicle run [prompt]`: one prompt, no questions. The answer goes to
 * stdout as it streams (tool activity to stderr), or with `--format json`
 * every event of the session from the prompt on, one JSON object per line.
 * Permissions follow `--allow` / `--deny` (`permission[:pattern]`, wildcards
 * as in rules); a request no --allow covers is refused: a headless run fails
 * closed. The exit status says how the run ended.
 */

export const RUN_EXIT = {
  idle: 0,
  failed: 1,
  /** a permission no --allow covered was refused */
  refused: 3,
  max_steps: 4,
  cancelled: 130,
} as const

interface Matcher {
  readonly permission: string
  readonly pattern: string
  readonly source: string
}

function matchers(values: readonly string[]): Matcher[] {
  return values.map((source) => {
    const colon = source.indexOf(':')
    const permission = colon < 0 ? source : source.slice(0, colon)
    const pattern = colon < 0 ? '*' : source.slice(colon + 1)
    if (permission === '' || pattern === '')
      throw new UsageError(`--allow/--deny take permission[:pattern], e.g. read or 'bash:git *' (got ${source})`)
    return { permission, pattern, source }
  })
}

const covers = (m: Matcher, permission: string, pattern: string) =>
  wildcardMatch(permission, m.permission) && wildcardMatch(pattern, m.pattern)

/**
 * What headless policy answers to a request: deny wins over allow, and nothing matching is a refusal. A bash
 * request is judged per simple command, as the server's rules judge it (`ls && touch x` needs `touch x` allowed
 * too), and one whose commands cannot all be read (`$cmd`, `eval …`) is never allowed by a pattern.
 */
export function decide(
  request: Pick<PermissionAsk, 'permission' | 'patterns'>,
  allow: readonly Matcher[],
  deny: readonly Matcher[],
): { reply: 'once' | 'reject'; why: 'allowed' | 'denied' | 'unmatched'; pattern?: string } {
  const given = request.patterns.length > 0 ? request.patterns : ['*']
  const { patterns, complete, dynamic } = expandPatterns({ permission: request.permission, patterns: given })
  for (const pattern of [...patterns, ...given])
    if (deny.some((m) => covers(m, request.permission, pattern))) return { reply: 'reject', why: 'denied', pattern }
  if (!complete || dynamic) return { reply: 'reject', why: 'unmatched', pattern: given.join(' ') }
  for (const pattern of patterns)
    if (!allow.some((m) => covers(m, request.permission, pattern)))
      return { reply: 'reject', why: 'unmatched', pattern }
  return { reply: 'once', why: 'allowed' }
}

async function readPrompt(args: Args, stdin: CliIo['stdin']): Promise<string> {
  const given = args.positionals.join(' ').trim()
  if (given !== '' && given !== '-') return given
  if (stdin.isTTY) throw new UsageError('run needs a prompt: as an argument, or on stdin')
  const chunks: Buffer[] = []
  for await (const chunk of stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)))
  const text = Buffer.concat(chunks).toString('utf8').trim()
  if (text === '') throw new UsageError('run needs a prompt: stdin was empty')
  return text
}

export async function runCommand(args: Args, io: CliIo): Promise<number> {
  const format = flag(args, 'format') ?? 'text'
  if (format !== 'text' && format !== 'json') throw new UsageError('--format is text or json')
  if (args.flags.has('session') && args.flags.has('continue')) throw new UsageError('--session or --continue, not both')
  const allow = matchers(listFlag(args, 'allow'))
  const deny = matchers(listFlag(args, 'deny'))
  const prompt = await readPrompt(args, io.stdin)
  const { stdout, stderr } = io

  let finish: (code: number) => void = () => {}
  const finished = new Promise<number>((resolve) => (finish = resolve))
  const socket = await connect({
    onStatus: (status, reason) => {
      if (status === 'reconnecting') stderr.line(`(connection lost: ${reason}; reconnecting…)`)
      if (status === 'closed') {
        stderr.line(`chronicle: connection closed (${reason}) before the run ended`)
        finish(RUN_EXIT.failed)
      }
    },
  })
  try {
    const named = flag(args, 'session')
    const { id: session } = await chooseSession(args, socket, { ...(named && { named }), term: stderr })
    const { seq } = await socket.call('session.state', { session })
    const inputId = `in_${randomUUID()}`
    let runId: string | undefined
    let refused = false
    /** our run has finished: what follows (a title, other runs) is not this command's */
    let over = false

    const answer = new StreamWrapper(stdout.write, stdout.width)
    let answerMidLine = false
    const activity = new LiveRenderer(stderr, {
      onPermission: (request) => {
        const verdict = decide(request, allow, deny)
        const what = `${request.permission} ${request.patterns.join(' ')}`.trim()
        if (verdict.why === 'unmatched') {
          refused = true
          stderr.line(
            `chronicle: refused ${what}: no --allow covers ${verdict.pattern} (a headless run fails closed; allow it with --allow '${request.permission}:${verdict.pattern}')`,
          )
        } else if (verdict.why === 'denied') stderr.line(`chronicle: denied ${what} (--deny)`)
        void socket
          .call('permission.reply', {
            session,
            requestId: request.requestId,
            reply: verdict.reply,
            ...(verdict.reply === 'reject' && {
              message:
                verdict.why === 'denied'
                  ? `The user's --deny refuses ${what}.`
                  : `Not allowed in this headless run (no --allow covers ${verdict.pattern}).`,
            }),
          })
          .catch((err: Error) => stderr.line(`chronicle: ${err.message}`))
      },
      onElicitation: (question) => {
        // nobody to ask in a headless run: the question is declined, and said, so the run goes on instead of waiting
        stderr.line(`chronicle: declined ${printable(question.server)}'s question (a headless run cannot answer it)`)
        void socket
          .call('elicitation.answer', { session, elicitationId: question.elicitationId, action: 'decline' })
          .catch((err: Error) => stderr.line(`chronicle: ${err.message}`))
      },
      onRunFinished: (outcome) => {
        if (answerMidLine) stdout.write('\n')
        finish(refused ? RUN_EXIT.refused : (RUN_EXIT[outcome as keyof typeof RUN_EXIT] ?? RUN_EXIT.failed))
      },
    })
    await socket.subscribe({ sessions: [session], after: seq }, (frame) => {
      const { type, data, at, meta } = frame.event
      if (over) return
      if (type === 'input.delivered' && data.inputId === inputId) runId = meta?.run as string | undefined
      // a session runs one run at a time: from our input's delivery to its run's end, the deltas are ours
      const ours = runId !== undefined
      if (type === 'run.finished' && data.runId === runId) over = true
      if (format === 'json')
        stdout.write(`${JSON.stringify({ seq: frame.seq, session, version: frame.version, type, data, at, meta })}\n`)
      else if (ours && type === 'text.delta') {
        // on a terminal the model's control characters are shown, not obeyed; a pipe gets its text as it is
        answer.write(stdout.width ? printable(String(data.text)) : String(data.text))
        answerMidLine = !String(data.text).endsWith('\n')
        return
      } else if (ours && type === 'text.ended') {
        answer.end()
        return
      }
      // the answers and the end only count for the run that took this prompt
      if (type === 'run.finished' && data.runId !== runId) return
      if (
        format === 'text' ||
        type === 'permission.requested' ||
        type === 'elicitation.requested' ||
        type === 'run.finished'
      )
        activity.handle({ seq: frame.seq, type, data })
    })

    let interrupts = 0
    const onInterrupt = () => {
      if (++interrupts > 1) finish(RUN_EXIT.cancelled)
      else {
        stderr.line('(cancelling — Ctrl-C again to quit)')
        void socket.call('run.cancel', { session }).catch(() => finish(RUN_EXIT.cancelled))
      }
    }
    process.on('SIGINT', onInterrupt)
    try {
      await socket.call('input.submit', { session, inputId, parts: [{ type: 'text', text: prompt }] })
      return await finished
    } finally {
      process.removeListener('SIGINT', onInterrupt)
    }
  } finally {
    socket.close()
  }
}
