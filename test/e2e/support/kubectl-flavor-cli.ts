// The kubectl-flavor plugin as a user runs it (a subprocess, from the sources), with the exit
// code and both streams, whatever the exit code.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const repoRoot = join(import.meta.dirname, '..', '..', '..');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function kubectlFlavor(kubeconfigPath: string, args: string[]): Promise<CliResult> {
  return run(
    process.execPath,
    [
      '--import',
      'tsx',
      join(repoRoot, 'src', 'cli', 'kubectl-flavor.ts'),
      ...args,
      '--kubeconfig',
      kubeconfigPath,
    ],
    { cwd: repoRoot },
  ).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: CliResult) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr }),
  );
}
