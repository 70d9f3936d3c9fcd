import type { EventLog } from '../events/log.js'
import { sqliteLog } from '../events/log.js'
import type { PostgresEventLog } from '../events/postgres/log.js'
import type { EventStore } from '../events/store.js'
import { postgresReadModels } from './postgres/read-models.js'
import { postgresTimeTravel } from './postgres/time-travel.js'
import { type ReadModels, sqliteReadModels } from './read-models.js'
import { sqliteTimeTravel, type TimeTravel } from './time-travel/port.js'
import type { TimeTravelOptions } from './time-travel/time-travel.js'

/**
 * The store as code outside it takes it (docs/ARCHITECTURE.md "The store
 * port"): the log, the read models and time travel of one engine, each
 * reading its own writes. Only the composition roots make one.
 */
export interface StorePorts {
  readonly log: EventLog
  readonly readModels: ReadModels
  readonly timeTravel: TimeTravel
}

const SQLITE_PORTS = Symbol('store ports')

/** SQLite's store as the ports: one set per store, so code comparing them sees the same. */
export function sqlitePorts(store: EventStore, travel?: TimeTravelOptions): StorePorts {
  const make = (): StorePorts => ({
    log: sqliteLog(store),
    readModels: sqliteReadModels(store),
    timeTravel: sqliteTimeTravel(store, travel),
  })
  return travel ? make() : store.local(SQLITE_PORTS, make)
}

/** PostgreSQL's log (opened with its projection: src/projections/postgres/open.ts) as the ports. */
export function postgresPorts(log: PostgresEventLog): StorePorts {
  return { log, readModels: postgresReadModels(log), timeTravel: postgresTimeTravel(log) }
}
