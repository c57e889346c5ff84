'use strict';
// A CDP relay for a client that cannot be asked to do what the adapter needs on its connection.
// Every frame passes through unchanged, both ways; `call` sends the adapter's own command on the
// client's connection to the engine and keeps its reply from the client. Used by the served
// chrome-devtools-mcp adapter on an engine that holds one browser context per connection
// (Lightpanda): only the MCP server's connection can dispose of the context an attempt made.

const WebSocket = require('ws');

// Far above any id a client numbering from 1 reaches, below 2^31 for engines that read an i32.
const FIRST_OWN_ID = 2000000000;
const CALL_TIMEOUT_MS = 5000;
// A reply of ours is a few hundred bytes; a larger frame is never parsed to look for one.
const MAX_OWN_REPLY = 65536;

function startRelay(upstreamUrl) {
  const server = new WebSocket.Server({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
  const relay = { upstream: null, pending: new Map(), next: FIRST_OWN_ID };
  server.on('connection', (client) => pair(relay, client, upstreamUrl));
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.once('listening', () => {
      const { port } = server.address();
      relay.url = `ws://127.0.0.1:${port}${new URL(upstreamUrl).pathname}`;
      relay.call = (method, params) => call(relay, method, params);
      relay.close = () => server.close();
      resolve(relay);
    });
  });
}

// One client connection, one engine connection; either closing closes the other.
function pair(relay, client, upstreamUrl) {
  const upstream = new WebSocket(upstreamUrl, { perMessageDeflate: false, maxPayload: 0 });
  const early = [];
  client.on('message', (data) => (upstream.readyState === WebSocket.OPEN ? upstream.send(data) : early.push(data)));
  upstream.on('open', () => {
    relay.upstream = upstream;
    for (const data of early.splice(0)) upstream.send(data);
  });
  upstream.on('message', (data) => { if (!ownReply(relay, data)) client.send(data); });
  const end = () => {
    if (relay.upstream === upstream) relay.upstream = null;
    for (const settle of relay.pending.values()) settle({ error: { message: 'the engine connection closed' } });
    relay.pending.clear();
    client.terminate();
    upstream.terminate();
  };
  client.on('close', end);
  upstream.on('close', end);
  client.on('error', end);
  upstream.on('error', end);
}

function ownReply(relay, data) {
  if (!relay.pending.size || data.length > MAX_OWN_REPLY) return false;
  let message;
  try { message = JSON.parse(data); } catch (e) { return false; }
  const settle = relay.pending.get(message.id);
  if (!settle) return false;
  relay.pending.delete(message.id);
  settle(message);
  return true;
}

function call(relay, method, params) {
  if (!relay.upstream) return Promise.reject(new Error('the relay has no engine connection'));
  relay.next += 1;
  const id = relay.next;
  return new Promise((resolve, reject) => {
    // an engine that stops answering must not hold the attempt's end until its deadline
    const timer = setTimeout(() => {
      relay.pending.delete(id);
      reject(new Error(`${method}: no answer from the engine in ${CALL_TIMEOUT_MS} ms`));
    }, CALL_TIMEOUT_MS);
    relay.pending.set(id, (m) => {
      clearTimeout(timer);
      if (m.error) reject(new Error(`${method}: ${m.error.message}`));
      else resolve(m.result);
    });
    relay.upstream.send(JSON.stringify({ id, method, params: params || {} }));
  });
}

module.exports = { startRelay };
