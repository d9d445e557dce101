// What the attested-join e2e tests share: JSON over HTTPS to the issuer (trusting its test CA),
// and the node-side script of an attested token's material run as a machine would run it, with
// its TPM at `tcti` (a software TPM: test/e2e/support/swtpm.ts).
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';

export interface JsonAnswer<T = Record<string, unknown>> {
  status: number;
  body: T;
  text: string;
}

export function postJson<T = Record<string, unknown>>(
  url: string,
  ca: string,
  body: unknown,
  bearer?: string,
): Promise<JsonAnswer<T>> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        ca,
        headers: {
          'Content-Type': 'application/json',
          'Content-Length': Buffer.byteLength(payload),
          ...(bearer ? { Authorization: `Bearer ${bearer}` } : {}),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          text += chunk;
        });
        res.on('end', () => {
          let parsed: unknown = {};
          try {
            parsed = JSON.parse(text);
          } catch {
            // not JSON: the text says what it is
          }
          resolve({ status: res.statusCode ?? 0, body: parsed as T, text });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

export interface ScriptRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Where --prepare-only wrote the JoinConfiguration. */
  joinConfigPath: string;
}

/**
 * Runs an attested material's script with --prepare-only (the test starts `kubeadm join` itself,
 * as systemd-less real nodes need): its template and the issuer CA from the material's own
 * cloud-init files, placed in `dir` instead of /etc/kubernetes.
 */
export function runAttestScript(options: {
  script: string;
  joinTemplate: string;
  issuerCaPem: string;
  tcti: string;
  dir: string;
}): Promise<ScriptRun> {
  mkdirSync(options.dir, { recursive: true });
  const scriptPath = join(options.dir, 'nodeflavor-attest');
  const templatePath = join(options.dir, 'join.template.yaml');
  const caPath = join(options.dir, 'issuer-ca.pem');
  const joinConfigPath = join(options.dir, 'join.yaml');
  writeFileSync(scriptPath, options.script, { mode: 0o700 });
  writeFileSync(templatePath, options.joinTemplate, { mode: 0o600 });
  writeFileSync(caPath, options.issuerCaPem);
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [scriptPath, '--prepare-only'], {
      env: {
        ...process.env,
        TPM2TOOLS_TCTI: options.tcti,
        NODEFLAVOR_JOIN_TEMPLATE: templatePath,
        NODEFLAVOR_JOIN_CONFIG: joinConfigPath,
        NODEFLAVOR_ISSUER_CA: caPath,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr, joinConfigPath }));
  });
}
