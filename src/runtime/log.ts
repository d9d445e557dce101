// Every logger of the process (pino, JSON), with one redaction list. Secrets are kept out twice:
// nothing logs a request body, a response body or a header wholesale, and the redaction censors
// the known secret-bearing fields should one ever be passed to a log call anyway. The Secret class
// prints as [redacted] (src/flavor/secret.ts).
import { type DestinationStream, type Logger, pino } from 'pino';

/** Fields whose values are secrets, or may hold one, wherever a log call puts them. */
export const REDACTED_PATHS = [
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
  'secret',
  '*.secret',
  'key',
  '*.key',
  'keyPem',
  '*.keyPem',
];

/** A logger for one part of the process (`component` in every line). */
export function createLogger(component: string, level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { component },
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return destination ? pino(options, destination) : pino(options);
}
