import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { createAnthropic } from '@ai-sdk/anthropic'
import { createGoogleGenerativeAI } from '@ai-sdk/google'
import { createOpenAI } from '@ai-sdk/openai'
import { createOpenAICompatible } from '@ai-sdk/openai-compatible'
import { ChronicleError } from '../../events/errors.js'
import { ACCEPTS_ALL, type LanguageModel, type ModelHandle, type ModelResolver } from './adapter.js'
import { modelProfile } from './pricing.js'
import { createScriptedModel, loadScript } from './scripted-model.js'

/**
 * Providers from configuration strings (README "Configuration", docs/API.md):
 *   openai:<model>      OpenAI Responses API (@ai-sdk/openai)
 *   anthropic:<model>   Anthropic Messages API (@ai-sdk/anthropic)
 *   google:<model>      Google Gemini API (@ai-sdk/google)
 *   compatible:<model>  any OpenAI-compatible chat-completions server at `baseURL` (Ollama, vLLM, llama.cpp)
 *   scripted:<file>     the deterministic scripted model playing a JSON script
 */

export interface ProviderConfig {
  /** the model used when neither the input nor the session names one (CHRONICLE_MODEL) */
  readonly defaultModel?: string | null
  /** for compatible: (CHRONICLE_BASE_URL), and openai: when openaiBaseURL is unset */
  readonly baseURL?: string
  readonly apiKey?: string
  readonly openaiBaseURL?: string
  readonly openaiApiKey?: string
  readonly anthropicBaseURL?: string
  readonly anthropicApiKey?: string
  readonly googleBaseURL?: string
  readonly googleApiKey?: string
  /** for scripted: paths */
  readonly cwd?: string
  /** per model (by spec, or by the id after the provider): settings applied to its calls and its prices */
  readonly models?: Readonly<Record<string, Parameters<typeof modelProfile>[0]>>
}

export function providerConfigFromEnv(env: NodeJS.ProcessEnv = process.env): ProviderConfig {
  return {
    defaultModel: env.CHRONICLE_MODEL || null,
    ...(env.CHRONICLE_BASE_URL && { baseURL: env.CHRONICLE_BASE_URL }),
    ...(env.CHRONICLE_API_KEY && { apiKey: env.CHRONICLE_API_KEY }),
    ...(env.OPENAI_BASE_URL && { openaiBaseURL: env.OPENAI_BASE_URL }),
    ...(env.OPENAI_API_KEY && { openaiApiKey: env.OPENAI_API_KEY }),
    ...(env.ANTHROPIC_BASE_URL && { anthropicBaseURL: env.ANTHROPIC_BASE_URL }),
    ...(env.ANTHROPIC_API_KEY && { anthropicApiKey: env.ANTHROPIC_API_KEY }),
    ...(env.GOOGLE_BASE_URL && { googleBaseURL: env.GOOGLE_BASE_URL }),
    ...(env.GOOGLE_GENERATIVE_AI_API_KEY && { googleApiKey: env.GOOGLE_GENERATIVE_AI_API_KEY }),
  }
}

export function createModelResolver(config: ProviderConfig = {}): ModelResolver {
  const cache = new Map<string, ModelHandle>()

  const build = (spec: string): LanguageModel => {
    const colon = spec.indexOf(':')
    const kind = colon < 0 ? '' : spec.slice(0, colon)
    const id = spec.slice(colon + 1)
    if (!id) throw new ChronicleError('UNKNOWN_MODEL', `model "${spec}" has no id after the provider`)
    switch (kind) {
      case 'openai':
        return createOpenAI({
          apiKey: config.openaiApiKey ?? config.apiKey ?? 'unset',
          ...((config.openaiBaseURL ?? config.baseURL) && { baseURL: config.openaiBaseURL ?? config.baseURL }),
        })(id)
      case 'anthropic':
        return createAnthropic({
          apiKey: config.anthropicApiKey ?? 'unset',
          ...(config.anthropicBaseURL && { baseURL: config.anthropicBaseURL }),
        })(id)
      case 'google':
        return createGoogleGenerativeAI({
          apiKey: config.googleApiKey ?? 'unset',
          ...(config.googleBaseURL && { baseURL: config.googleBaseURL }),
        })(id)
      case 'compatible':
        if (!config.baseURL)
          throw new ChronicleError('UNKNOWN_MODEL', `model "${spec}" needs a base URL (CHRONICLE_BASE_URL)`)
        return createOpenAICompatible({
          name: 'compatible',
          baseURL: config.baseURL,
          apiKey: config.apiKey ?? 'unset',
          includeUsage: true,
        }).chatModel(id)
      case 'scripted': {
        const file = resolve(config.cwd ?? process.cwd(), id)
        if (!existsSync(file)) throw new ChronicleError('UNKNOWN_MODEL', `scripted model file not found: ${file}`)
        return createScriptedModel(loadScript(file), id)
      }
      default:
        throw new ChronicleError(
          'UNKNOWN_MODEL',
          `unknown model "${spec}": expected openai:<id>, anthropic:<id>, google:<id>, compatible:<id> or scripted:<file>`,
        )
    }
  }

  const handle = (spec: string): ModelHandle => {
    let h = cache.get(spec)
    if (!h) {
      const id = spec.slice(spec.indexOf(':') + 1)
      const profile = modelProfile(config.models?.[spec] ?? config.models?.[id] ?? {})
      // an OpenAI-compatible server's model is assumed to read text only unless its config says otherwise
      const accepts = profile.accepts ?? (spec.startsWith('compatible:') ? [] : ACCEPTS_ALL)
      h = { spec, model: build(spec), ...profile, accepts }
      cache.set(spec, h)
    }
    return h
  }

  return {
    validate(spec) {
      handle(spec)
    },
    resolve(spec) {
      const chosen = spec ?? config.defaultModel ?? null
      return chosen ? handle(chosen) : undefined
    },
  }
}

/** A resolver that answers every spec (and the default) with one model: for tests and benchmarks. */
export function fixedModelResolver(model: LanguageModel, spec = 'fixed:model'): ModelResolver {
  const h = { spec, model }
  return { validate() {}, resolve: () => h }
}
