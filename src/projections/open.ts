import { EventStore, type StoreOptions } from '../events/store.js'
import type { InheritFn } from './fold/fold.js'
import { createProjector, type ProjectorOptions } from './rows/projector.js'
import { maintainSnapshots } from './time-travel/snapshot-maintainer.js'
import { configureTimeTravel, snapshotInherit, type TimeTravelOptions } from './time-travel/time-travel.js'

export interface OpenOptions extends Omit<StoreOptions, 'project'>, TimeTravelOptions, ProjectorOptions {
  /** how a fork's inherited state is resolved; defaults to time travel with the snapshot cache */
  readonly inherit?: (store: EventStore) => InheritFn
  /** extend snapshot chains in the background after commits (default true); otherwise only stateAt extends them */
  readonly snapshotOnCommit?: boolean
}

/** An event store whose appends keep the Session / Message / Part read models up to date. */
export function openStore(path: string, options: OpenOptions = {}): EventStore {
  let inherit: InheritFn = () => {
    throw new Error('store not ready')
  }
  const store = EventStore.open(path, {
    project: createProjector((from) => inherit(from), options),
    ...(options.now && { now: options.now }),
  })
  if (options.snapshotEvery !== undefined) configureTimeTravel(store, { snapshotEvery: options.snapshotEvery })
  inherit = options.inherit ? options.inherit(store) : snapshotInherit(store)
  if (options.snapshotOnCommit !== false) {
    maintainSnapshots(store, options.snapshotEvery === undefined ? {} : { every: options.snapshotEvery })
  }
  return store
}
