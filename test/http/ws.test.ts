import { startServer } from './helpers.js'
import { describeWebSocket } from './ws-contract.js'

describeWebSocket('SQLite', startServer)
