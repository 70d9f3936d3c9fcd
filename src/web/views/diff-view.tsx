import type { DiffView as Diff } from '../../client/index.js'
import { Badge, formatCount } from '../ui.js'

/** At most this many patch lines are drawn; the rest is counted. */
const MAX_LINES = 4000

/** `session.diff` drawn: the files changed, then the unified patch with its lines marked. */
export function DiffView({ diff, title }: { diff: Diff; title: string }) {
  const lines = diff.patch === '' ? [] : diff.patch.split('\n')
  const shown = lines.length > MAX_LINES ? lines.slice(0, MAX_LINES) : lines
  return (
    <section class="diff-view" aria-label={title}>
      <h3>{title}</h3>
      {diff.files.length === 0 ? (
        <p class="empty">No file changed.</p>
      ) : (
        <ul class="files">
          {diff.files.map((f) => (
            <li key={f.path}>
              <code>{f.path}</code> <Badge kind={f.status}>{f.status}</Badge>
              {f.binary ? ' binary' : f.added !== undefined && ` +${f.added} −${f.removed ?? 0}`}
            </li>
          ))}
        </ul>
      )}
      {shown.length > 0 && (
        <pre class="patch">
          {shown.map((line, i) => (
            <span key={i} class={lineClass(line)}>
              {line}
              {'\n'}
            </span>
          ))}
        </pre>
      )}
      {lines.length > MAX_LINES && <p class="note">{formatCount(lines.length - MAX_LINES)} more lines not shown.</p>}
    </section>
  )
}

function lineClass(line: string): string {
  if (line.startsWith('+++') || line.startsWith('---') || line.startsWith('diff ')) return 'l-file'
  if (line.startsWith('@@')) return 'l-hunk'
  if (line.startsWith('+')) return 'l-add'
  if (line.startsWith('-')) return 'l-del'
  return 'l-ctx'
}
