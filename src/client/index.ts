/**
 * Chronicle's client SDK (`chronicle/client`): the protocol over HTTP and
 * over WebSocket with resume. The CLI is built on it. docs/API.md describes
 * every method; README.md has an example.
 */
export { ApiError } from './errors.js'
export { ChronicleHttp, type RequestOptions, type ServerOptions } from './http.js'
export type * from './protocol.js'
export {
  ChronicleSocket,
  type SocketOptions,
  type SocketStatus,
  type SubscribeOptions,
  type Subscription,
  type WebSocketFactory,
  type WebSocketLike,
} from './socket.js'
