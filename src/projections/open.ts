import { EventStore, type StoreOptions } from '../events/store.js'
import { foldSession, type InheritFn } from './fold.js'
import { createProjector } from './projector.js'

export interface OpenOptions extends Omit<StoreOptions, 'project'> {
  /** how a fork's inherited state is resolved; defaults to folding the parent's log */
  readonly inherit?: (store: EventStore) => InheritFn
}

/** An event store whose appends keep the Session / Message / Part read models up to date. */
export function openStore(path: string, options: OpenOptions = {}): EventStore {
  let inherit: InheritFn = () => {
    throw new Error('store not ready')
  }
  const store = EventStore.open(path, { ...options, project: createProjector((from) => inherit(from)) })
  inherit = options.inherit ? options.inherit(store) : (from) => foldSession(store, from.sessionId, from.seq)
  return store
}
