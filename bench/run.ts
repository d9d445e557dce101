// `make bench [SCALE=quick]`: every figure script in its own process and on its own fresh control
// plane (so one figure's 10,000 nodes do not slow the next), then one table and bench/results.json.
//   node --import tsx bench/run.ts --scale full|quick [--only p1,p3]
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { benchDir, buildOperator, type Figure, log, printTable, scaleFromArgs, writeResults } from './lib.ts';

const SCRIPTS: { id: string; file: string }[] = [
  { id: 'p1', file: 'p1-join.ts' },
  { id: 'p2', file: 'p2-admission.ts' },
  { id: 'p3', file: 'p3-issuance.ts' },
  { id: 'p3writes', file: 'p3-write-cost.ts' },
  { id: 'abuse', file: 'issuer-abuse.ts' },
  { id: 'p4p5', file: 'p4-p5-fleet.ts' },
  { id: 'fuzz', file: 'fuzz-flavor-tokens.ts' },
  { id: 'cliff', file: 'discovery-cliff.ts' },
];

function runScript(file: string, scale: string, out: string): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(import.meta.dirname, file), '--scale', scale, '--json', out],
      {
        stdio: ['ignore', 'inherit', 'inherit'],
      },
    );
    child.on('exit', (code) => resolve(code ?? 1));
  });
}

function existingFigures(): Figure[] {
  try {
    return (
      JSON.parse(readFileSync(join(import.meta.dirname, 'results.json'), 'utf8')) as { figures: Figure[] }
    ).figures;
  } catch {
    return [];
  }
}

buildOperator(); // children inherit NODEFLAVOR_BENCH_BUILT=1 and do not build again
const scale = scaleFromArgs();
const onlyAt = process.argv.indexOf('--only');
const only = onlyAt >= 0 ? new Set((process.argv[onlyAt + 1] ?? '').split(',')) : undefined;
const dir = benchDir('nodeflavor-bench-');
const figures: Figure[] = [];
let failed = 0;
for (const script of SCRIPTS) {
  if (only && !only.has(script.id)) continue;
  log(`running ${script.file} (${scale})`);
  const out = join(dir, `${script.id}.json`);
  const code = await runScript(script.file, scale, out);
  if (code !== 0) {
    failed += 1;
    log(`${script.file} failed (exit ${code})`);
    continue;
  }
  figures.push(...(JSON.parse(readFileSync(out, 'utf8')) as Figure[]));
}
if (only) {
  // A partial run replaces its own figures and keeps the others from the last results.json.
  const previous = existingFigures().filter((f) => !figures.some((g) => g.name === f.name));
  figures.unshift(...previous);
}
console.log('');
printTable(figures);
writeResults(figures, scale);
log(`wrote bench/results.json (${figures.length} figures${failed ? `, ${failed} script(s) failed` : ''})`);
process.exit(failed ? 1 : 0);
