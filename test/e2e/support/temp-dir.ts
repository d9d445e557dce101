// A temp dir for a test process (operator logs, kubeconfigs): removed when the process exits,
// passed or failed, so no run leaves one behind (some hold kubeconfigs with tokens).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function tempDirForThisProcess(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
