/**
 * Compaction budgets (docs/COMPACTION.md; OpenCode V2 defaults). A model's usable window
 * is its context window minus a reserve for the answer: 20k tokens, or 15% of
 * the window when that is smaller (small local models). The recent tail kept
 * verbatim has its own budget (15k). Everything is configurable, per model
 * where it depends on the model.
 */

export interface ModelLimits {
  readonly contextWindow?: number
  readonly maxOutput?: number
  /** tokens kept free below the window for this model (overrides the global reserve) */
  readonly reserved?: number
}

/** Pruning old tool outputs (docs/COMPACTION.md "Pruning"; OpenCode's PRUNE_PROTECT / PRUNE_MINIMUM). */
export interface PruneConfig {
  /** false: tool outputs are sent until a compaction summarises them */
  readonly enabled: boolean
  /** tokens of the most recent tool outputs always sent (older ones are pruned) */
  readonly protect: number
  /** a pruning happens only when it saves at least this many tokens (each changes the request's prefix) */
  readonly minimum: number
}

export interface CompactionConfig {
  /** false disables automatic and overflow compaction; manual compaction still works */
  readonly auto: boolean
  /** tokens kept free below the window; default min(20k, 15% of the window) */
  readonly reserved?: number
  /** budget of the recent turns kept verbatim */
  readonly tail: number
  /** how many times a compaction request that is itself too large is shrunk before it fails */
  readonly maxShrinks: number
  /** the window assumed for models the configuration does not describe; undefined: no automatic trigger */
  readonly defaultContextWindow?: number
  /** model metadata by full spec (`openai:gpt-4o`) or by model id (`gpt-4o`) */
  readonly models: Readonly<Record<string, ModelLimits>>
  readonly prune: PruneConfig
}

export const DEFAULT_RESERVE = 20_000
export const SMALL_WINDOW_RESERVE_RATIO = 0.15

export const DEFAULT_COMPACTION: CompactionConfig = {
  auto: true,
  tail: 15_000,
  maxShrinks: 3,
  defaultContextWindow: 128_000,
  models: {},
  prune: { enabled: true, protect: 40_000, minimum: 20_000 },
}

/** A configuration's settings, each optional (the config file's `compaction`). */
export type CompactionSettings = Partial<Omit<CompactionConfig, 'prune'>> & { readonly prune?: Partial<PruneConfig> }

export function compactionConfig(partial: CompactionSettings = {}): CompactionConfig {
  const defined = Object.fromEntries(
    Object.entries(partial).filter(([, v]) => v !== undefined),
  ) as Partial<CompactionConfig>
  const prune = Object.assign({}, DEFAULT_COMPACTION.prune, definedOnly(partial.prune ?? {}))
  return { ...DEFAULT_COMPACTION, ...defined, models: { ...DEFAULT_COMPACTION.models, ...partial.models }, prune }
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>
}

export function limitsFor(config: CompactionConfig, spec: string): ModelLimits {
  const id = spec.slice(spec.indexOf(':') + 1)
  return config.models[spec] ?? config.models[id] ?? {}
}

export interface Budget {
  readonly contextWindow: number
  readonly reserve: number
  /** the estimate at or above which a step compacts first */
  readonly usable: number
  /** tokens of recent history kept verbatim */
  readonly tail: number
}

/** The model's budget, or undefined when its window is unknown (then only overflow and manual compaction apply). */
export function budgetFor(config: CompactionConfig, spec: string): Budget | undefined {
  const limits = limitsFor(config, spec)
  const contextWindow = limits.contextWindow ?? config.defaultContextWindow
  if (!contextWindow) return undefined
  const reserve =
    limits.reserved ??
    config.reserved ??
    Math.min(DEFAULT_RESERVE, Math.floor(contextWindow * SMALL_WINDOW_RESERVE_RATIO))
  const usable = Math.max(1, contextWindow - reserve)
  // The tail must leave room for the summary and new work: never more than half the usable window.
  return { contextWindow, reserve, usable, tail: Math.min(config.tail, Math.floor(usable / 2)) }
}
