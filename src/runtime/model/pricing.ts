import type { Usage } from '../../events/catalogue.js'

/**
 * What a model is configured with beyond its name (config `models.<spec>`):
 * the sampling settings applied to every call, and its prices.
 */

export interface ModelSettings {
  readonly maxOutputTokens?: number
  readonly temperature?: number
  readonly topP?: number
}

/** USD per million tokens */
export interface ModelPrice {
  readonly input: number
  readonly output: number
  /** cached input tokens (default: the input price) */
  readonly cachedInput?: number
}

/**
 * The cost of one model call in USD: uncached input, cached input and output
 * (reasoning tokens are part of the output) at their prices.
 */
export function costOf(usage: Usage, price: ModelPrice): number {
  const input = usage.inputTokens ?? 0
  const cached = Math.min(usage.cachedInputTokens ?? 0, input)
  const output = usage.outputTokens ?? 0
  const usd =
    ((input - cached) * price.input + cached * (price.cachedInput ?? price.input) + output * price.output) / 1e6
  return Math.round(usd * 1e9) / 1e9 // nano-dollars: sums of many steps stay exact enough to read
}

/** The settings and price a config entry gives; none when it gives none. */
export function modelProfile(info: {
  readonly maxOutput?: number
  readonly temperature?: number
  readonly topP?: number
  readonly inputPrice?: number
  readonly outputPrice?: number
  readonly cachedInputPrice?: number
  readonly accepts?: readonly ('image' | 'pdf')[]
}): { settings?: ModelSettings; price?: ModelPrice; accepts?: readonly ('image' | 'pdf')[] } {
  const settings: ModelSettings = {
    ...(info.maxOutput !== undefined && { maxOutputTokens: info.maxOutput }),
    ...(info.temperature !== undefined && { temperature: info.temperature }),
    ...(info.topP !== undefined && { topP: info.topP }),
  }
  const priced = info.inputPrice !== undefined || info.outputPrice !== undefined
  return {
    ...(info.accepts && { accepts: info.accepts }),
    ...(Object.keys(settings).length > 0 && { settings }),
    ...(priced && {
      price: {
        input: info.inputPrice ?? 0,
        output: info.outputPrice ?? 0,
        ...(info.cachedInputPrice !== undefined && { cachedInput: info.cachedInputPrice }),
      },
    }),
  }
}
