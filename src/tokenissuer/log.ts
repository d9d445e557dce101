// JSON logs (pino) for the issuer. Secrets are kept out twice: nothing logs a request body, a
// response body or a header wholesale, and the redaction below censors the known secret-bearing
// fields should one ever be passed to a log call anyway. The Secret class prints as [redacted].
import { type DestinationStream, type Logger, pino } from 'pino';

const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'headers.cookie',
  'authorization',
  '*.authorization',
  'bootstrapToken',
  '*.bootstrapToken',
  'flavorToken',
  '*.flavorToken',
  'joinConfiguration',
  '*.joinConfiguration',
  'cloudInit',
  '*.cloudInit',
  'token',
  '*.token',
  'key',
  '*.key',
  'keyPem',
  '*.keyPem',
];

export function createIssuerLogger(level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { component: 'token-issuer' },
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return destination ? pino(options, destination) : pino(options);
}
