// The server's defences against slow clients and connection hoarding, without a network: the
// timeouts handed to Node and fastify, the connection caps, and the answer to a client error.
import assert from 'node:assert/strict';
import { Socket } from 'node:net';
import { describe, it } from 'node:test';
import { parseIssuerConfig } from '../../src/tokenissuer/config.ts';
import {
  clientErrorAnswer,
  clientErrorReason,
  handleClientError,
} from '../../src/tokenissuer/defences/client-errors.ts';
import { ConnectionCounts } from '../../src/tokenissuer/defences/connection-limit.ts';
import { checkingIntervalMs, serverTimeouts } from '../../src/tokenissuer/server-options.ts';

const config = (connections: Record<string, unknown> = {}) =>
  parseIssuerConfig({ tls: { certPem: 'x', keyPem: 'y' }, connections });

describe('server timeouts', () => {
  it('defaults: headers 10 s, whole request 15 s, idle 65 s, TLS handshake within the headers timeout', () => {
    const t = serverTimeouts(config().connections);
    assert.deepEqual(t.fastify, { requestTimeout: 15_000, keepAliveTimeout: 65_000, connectionTimeout: 0 });
    assert.deepEqual(t.server, {
      headersTimeout: 10_000,
      requestTimeout: 15_000,
      keepAliveTimeout: 65_000,
      connectionsCheckingInterval: 500,
    });
    assert.deepEqual(t.tls, { handshakeTimeout: 10_000 });
  });

  it('checks often enough to cut within a quarter of the headers timeout (100–500 ms)', () => {
    assert.equal(checkingIntervalMs(1_000), 250);
    assert.equal(checkingIntervalMs(100), 100);
    assert.equal(checkingIntervalMs(60_000), 500);
  });

  it('refuses a headers timeout longer than the request timeout, and a per-address cap over the total', () => {
    assert.throws(
      () => config({ headersTimeoutSeconds: 20, requestTimeoutSeconds: 10 }),
      /headersTimeoutSeconds/,
    );
    assert.throws(() => config({ maxPerAddress: 10, max: 5 }), /maxPerAddress/);
    assert.throws(() => config({ idleTimeoutSeconds: 0 }), /idleTimeoutSeconds/);
  });

  it('trusted proxies must be addresses or CIDRs', () => {
    assert.deepEqual(
      parseIssuerConfig({ tls: { certPem: 'x', keyPem: 'y' }, trustedProxies: ['10.0.0.0/8', '::1'] })
        .trustedProxies,
      ['10.0.0.0/8', '::1'],
    );
    assert.throws(
      () => parseIssuerConfig({ tls: { certPem: 'x', keyPem: 'y' }, trustedProxies: ['ingress'] }),
      /trustedProxies.0: must be an IP address or a CIDR/,
    );
  });
});

describe('ConnectionCounts', () => {
  it('caps each address and the total; a trusted proxy only the total', () => {
    const counts = new ConnectionCounts({ maxPerAddress: 2, max: 4 });
    assert.equal(counts.admit('a', false), 'accept');
    assert.equal(counts.admit('a', false), 'accept');
    assert.equal(counts.admit('a', false), 'per_address');
    assert.equal(counts.admit('proxy', true), 'accept');
    assert.equal(counts.admit('proxy', true), 'accept');
    assert.equal(counts.admit('b', false), 'total');
    assert.equal(counts.total, 4);
    counts.release('a');
    assert.equal(counts.admit('a', false), 'accept');
    counts.release('proxy');
    counts.release('proxy');
    assert.equal(counts.admit('b', false), 'accept');
    assert.equal(counts.total, 3);
  });

  it('never goes below zero on a stray release', () => {
    const counts = new ConnectionCounts({ maxPerAddress: 1, max: 1 });
    counts.release('x');
    assert.equal(counts.total, 0);
    assert.equal(counts.admit('x', false), 'accept');
  });
});

describe('client errors', () => {
  const error = (code: string) => Object.assign(new Error(code), { code });

  it('a timeout is 408, oversized headers 431, bad HTTP 400 — in the error shape; TLS trouble and resets get no answer', () => {
    assert.equal(clientErrorReason(error('ERR_HTTP_REQUEST_TIMEOUT')), 'timeout');
    assert.equal(clientErrorReason(error('HPE_HEADER_OVERFLOW')), 'headers_too_large');
    assert.equal(clientErrorReason(error('HPE_INVALID_METHOD')), 'malformed');
    assert.equal(clientErrorReason(error('ERR_TLS_HANDSHAKE_TIMEOUT')), 'tls');
    assert.equal(clientErrorReason(error('ERR_SSL_WRONG_VERSION_NUMBER')), 'tls');
    assert.equal(clientErrorReason(error('ECONNRESET')), 'reset');
    const timeout = clientErrorAnswer('timeout') ?? '';
    assert.match(timeout, /^HTTP\/1\.1 408 Request Timeout\r\n/);
    assert.match(timeout, /Connection: close\r\n/);
    const body = JSON.parse(timeout.split('\r\n\r\n')[1] ?? '') as { error: { code: string } };
    assert.equal(body.error.code, 'RequestTimeout');
    assert.match(clientErrorAnswer('headers_too_large') ?? '', /^HTTP\/1\.1 431 /);
    assert.match(clientErrorAnswer('malformed') ?? '', /^HTTP\/1\.1 400 /);
    assert.equal(clientErrorAnswer('tls'), undefined);
    assert.equal(clientErrorAnswer('reset'), undefined);
  });

  it('never writes into a response already under way: it closes the connection', () => {
    const socket = new Socket();
    const written: string[] = [];
    Object.assign(socket, { _httpMessage: { headersSent: true } });
    const record = (chunk: string) => written.push(chunk);
    Object.assign(socket, { write: record, end: record });
    const reasons: string[] = [];
    handleClientError(error('ERR_HTTP_REQUEST_TIMEOUT'), socket, (reason) => reasons.push(reason));
    assert.deepEqual(written, []);
    assert.equal(socket.destroyed, true);
    assert.deepEqual(reasons, ['timeout']);
  });
});
