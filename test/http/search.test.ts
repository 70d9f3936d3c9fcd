import { startServer } from './helpers.js'
import { describeSearchRoutes } from './search-contract.js'

/** GET /search and the WebSocket `search` on a server whose store is SQLite's, its index a file of its own. */
describeSearchRoutes('SQLite', startServer)
