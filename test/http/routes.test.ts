import { startServer } from './helpers.js'
import { describeRoutes } from './routes-contract.js'

describeRoutes('SQLite', startServer)
