/**
 * A label's values, bounded: the first `max` distinct values pass (cut to
 * MAX_LENGTH characters), every later one is `(other)`. Tool names come from
 * MCP servers and model names from clients, both outside the server's
 * control: a Prometheus series per value must not grow without end
 * (docs/OBSERVABILITY.md "Labels").
 */

export const OTHER = '(other)'
const MAX_LENGTH = 100

export class BoundedLabels {
  private readonly seen = new Set<string>()

  constructor(private readonly max: number) {}

  of(value: string): string {
    const cut = value.length > MAX_LENGTH ? value.slice(0, MAX_LENGTH) : value
    if (this.seen.has(cut)) return cut
    if (this.seen.size >= this.max) return OTHER
    this.seen.add(cut)
    return cut
  }
}
