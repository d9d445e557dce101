// A lean HTTPS JSON client for the simulated kubelet: one keep-alive agent per identity, so a
// thousand simulated nodes in one process reuse their connections instead of re-handshaking.
import { Agent, request } from 'node:https';

export interface Credentials {
  /** PEM CA bundle to verify the server; omit only with `insecure` (kubeadm's discovery step). */
  ca?: string;
  insecure?: boolean;
  cert?: string;
  key?: string;
  bearerToken?: string;
  /**
   * A new connection for every request (default: keep-alive). Behind a load balancer in front of
   * several API servers, consecutive requests then land on different ones.
   */
  connectionPerRequest?: boolean;
}

export interface HttpResult<T = unknown> {
  status: number;
  body: T;
  text: string;
}

export class ApiError extends Error {
  readonly status: number;
  readonly reason: string;

  constructor(status: number, method: string, path: string, reason: string) {
    super(`${method} ${path}: HTTP ${status}: ${reason}`);
    this.status = status;
    this.reason = reason;
  }
}

export class KubeHttp {
  private readonly agent: Agent;
  readonly server: string;
  private readonly credentials: Credentials;

  constructor(server: string, credentials: Credentials) {
    this.server = server;
    this.credentials = credentials;
    this.agent = new Agent({
      keepAlive: true,
      maxSockets: 4,
      ca: credentials.ca,
      cert: credentials.cert,
      key: credentials.key,
      rejectUnauthorized: !credentials.insecure,
    });
  }

  request<T = unknown>(
    method: string,
    path: string,
    body?: unknown,
    contentType = 'application/json',
  ): Promise<HttpResult<T>> {
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    const headers: Record<string, string> = { Accept: 'application/json' };
    if (payload !== undefined) {
      headers['Content-Type'] = contentType;
      headers['Content-Length'] = String(Buffer.byteLength(payload));
    }
    if (this.credentials.bearerToken) headers.Authorization = `Bearer ${this.credentials.bearerToken}`;
    // The server closes the connection after answering: the next request dials again.
    if (this.credentials.connectionPerRequest) headers.Connection = 'close';
    return new Promise((resolve, reject) => {
      const req = request(
        new URL(path, this.server),
        { method, agent: this.agent, headers, timeout: 30_000 },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: unknown = text;
            try {
              parsed = text ? JSON.parse(text) : undefined;
            } catch {
              // not JSON (e.g. /healthz): keep the text
            }
            resolve({ status: res.statusCode ?? 0, body: parsed as T, text });
          });
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: timed out`)));
      req.on('error', reject);
      if (payload !== undefined) req.write(payload);
      req.end();
    });
  }

  /** Like request, but any non-2xx status becomes an ApiError carrying the API's message. */
  async must<T = unknown>(method: string, path: string, body?: unknown, contentType?: string): Promise<T> {
    const result = await this.request<T>(method, path, body, contentType);
    if (result.status < 200 || result.status > 299) {
      const status = result.body as { message?: string } | undefined;
      throw new ApiError(result.status, method, path, status?.message ?? result.text.slice(0, 300));
    }
    return result.body;
  }

  close(): void {
    this.agent.destroy();
  }
}
