// What the server says to a client whose HTTP never became a request (no request object exists,
// so fastify's error handler never sees it): one line in our error shape, then the connection is
// closed. A timeout (headers or body too slow) is 408; oversized headers 431; other malformed HTTP
// 400. TLS failures (a handshake that timed out or went wrong) and resets get no answer: there is
// no HTTP to answer in.
import type { Socket } from 'node:net';
import type { ErrorCode } from '../errors.ts';

type ClientErrorReason = 'timeout' | 'headers_too_large' | 'malformed' | 'tls' | 'reset';

interface Answer {
  status: string;
  code: ErrorCode;
  message: string;
}

const ANSWERS: Partial<Record<ClientErrorReason, Answer>> = {
  timeout: {
    status: '408 Request Timeout',
    code: 'RequestTimeout',
    message: 'the request did not arrive in time: send the headers and body without pauses',
  },
  headers_too_large: {
    status: '431 Request Header Fields Too Large',
    code: 'InvalidRequest',
    message: 'request headers are too large',
  },
  malformed: { status: '400 Bad Request', code: 'InvalidRequest', message: 'malformed HTTP request' },
};

export function clientErrorReason(error: NodeJS.ErrnoException): ClientErrorReason {
  const code = error.code ?? '';
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return 'timeout';
  if (code === 'HPE_HEADER_OVERFLOW') return 'headers_too_large';
  if (code.startsWith('HPE_')) return 'malformed';
  if (code === 'ECONNRESET' || code === 'EPIPE') return 'reset';
  return 'tls';
}

/** The raw HTTP answer for `reason`, or undefined when the connection is simply closed. */
export function clientErrorAnswer(reason: ClientErrorReason): string | undefined {
  const answer = ANSWERS[reason];
  if (!answer) return undefined;
  const body = JSON.stringify({ error: { code: answer.code, message: answer.message } });
  return (
    `HTTP/1.1 ${answer.status}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  );
}

/** fastify's clientErrorHandler: answers if it still can, then closes; `count` feeds a metric. */
export function handleClientError(
  error: NodeJS.ErrnoException,
  socket: Socket,
  count: (reason: ClientErrorReason) => void,
): void {
  const reason = clientErrorReason(error);
  count(reason);
  const answer = clientErrorAnswer(reason);
  // A response already under way on this socket (the body timed out after a handler answered)
  // must not be corrupted by a second one.
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (answer === undefined || socket.destroyed || !socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  // end() flushes the answer; destroy once it is out, whether or not the client ever reads it.
  socket.end(answer, () => socket.destroy());
  socket.setTimeout(1_000, () => socket.destroy());
}
