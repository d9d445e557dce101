// CI proves the suites ran (.ci/run): with NODEFLAVOR_REQUIRE_ALL_TESTS=1 a test that would skip
// itself fails instead, naming what and why (test/support/skip.ts), the install scripts fail
// rather than skip, and .ci/no-skips fails on any skipped or todo test or suite in the runner's
// output, also one that does not go through the helper. A developer's run without the variable
// still skips with the reason and passes. Each case runs the real test runner on a small test
// file in a scratch directory, removed afterwards.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { REQUIRE_ALL_TESTS_ENV, skipUnless } from '../support/skip.ts';

const run = promisify(execFile);
const root = join(import.meta.dirname, '..', '..');
const NO_SKIPS = join(root, '.ci', 'no-skips');
const SKIP_HELPER = join(root, 'test', 'support', 'skip.ts');

interface Result {
  code: number;
  output: string;
}

async function exec(command: string, args: string[], env: NodeJS.ProcessEnv, cwd?: string): Promise<Result> {
  try {
    const { stdout, stderr } = await run(command, args, { env, cwd, maxBuffer: 4 * 1024 * 1024 });
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const failed = error as { code?: number | string; stdout?: string; stderr?: string };
    if (typeof failed.code !== 'number') throw error;
    return { code: failed.code, output: (failed.stdout ?? '') + (failed.stderr ?? '') };
  }
}

/** This process's environment without the variable and without the runner's child protocol. */
function developerEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env = { ...process.env, ...extra };
  delete env.NODE_TEST_CONTEXT; // else a nested `node --test` reports in its parent's protocol
  if (!(REQUIRE_ALL_TESTS_ENV in extra)) delete env[REQUIRE_ALL_TESTS_ENV];
  return env;
}
const ciEnv = () => developerEnv({ [REQUIRE_ALL_TESTS_ENV]: '1' });

describe('CI fails when a test skips (.ci/run, .ci/no-skips, test/support/skip.ts)', () => {
  let dir: string;
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };
  /** `node --test` with the spec reporter, as package.json's scripts run it; then .ci/no-skips on its output. */
  async function testRun(
    testFile: string,
    env: NodeJS.ProcessEnv,
  ): Promise<{ tests: Result; check: Result }> {
    const tests = await exec(process.execPath, ['--test', '--test-reporter=spec', testFile], env, dir);
    const output = file('output.txt', tests.output);
    return { tests, check: await exec(NO_SKIPS, [output], env) };
  }

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'nodeflavor-ci-no-skips-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('skipUnless: no reason runs; a reason skips on a laptop and throws, naming what and why, in CI', () => {
    assert.equal(skipUnless('x', false, {}), false);
    assert.equal(skipUnless('x', undefined, { [REQUIRE_ALL_TESTS_ENV]: '1' }), false);
    assert.equal(skipUnless('the page test', 'no chromium', {}), 'no chromium');
    assert.equal(skipUnless('the page test', 'no chromium', { [REQUIRE_ALL_TESTS_ENV]: '0' }), 'no chromium');
    assert.throws(
      () => skipUnless('the page test', 'no chromium', { [REQUIRE_ALL_TESTS_ENV]: '1' }),
      /^Error: the page test would be skipped \(no chromium\), but NODEFLAVOR_REQUIRE_ALL_TESTS=1 \(CI\) requires every test to run/,
    );
  });

  it('a suite skipped through the helper: skipped with its reason on a laptop; in CI the file fails and no-skips names it', async () => {
    const suite = file(
      'helper.test.ts',
      `import { describe, it } from 'node:test';
import { skipUnless } from ${JSON.stringify(SKIP_HELPER)};
describe('the page test', { skip: skipUnless('the page test (helper.test.ts)', '/usr/bin/chromium is missing') }, () => {
  it('runs', () => {});
});
`,
    );
    const laptop = await testRun(suite, developerEnv());
    assert.equal(laptop.tests.code, 0, laptop.tests.output);
    assert.match(laptop.tests.output, /﹣ the page test \([0-9.]+ms\) # \/usr\/bin\/chromium is missing/);
    // The runner's own summary does not count a skipped suite: only its ﹣ line shows it.
    assert.match(laptop.tests.output, /^ℹ skipped 0$/m);
    assert.equal(laptop.check.code, 1, laptop.check.output);
    assert.match(laptop.check.output, /skipped: ﹣ the page test .*# \/usr\/bin\/chromium is missing/);

    const ci = await testRun(suite, ciEnv());
    assert.equal(ci.tests.code, 1, ci.tests.output);
    assert.match(
      ci.tests.output,
      /the page test \(helper\.test\.ts\) would be skipped \(\/usr\/bin\/chromium is missing\), but NODEFLAVOR_REQUIRE_ALL_TESTS=1/,
    );
    assert.equal(ci.check.code, 1, ci.check.output);
    assert.match(
      ci.check.output,
      /^\[no-skips\] refused to skip: the page test \(helper\.test\.ts\) would be skipped \(\/usr\/bin\/chromium is missing\)$/m,
    );
  });

  it('a skip or todo nobody wired to the helper still fails no-skips, each named with its reason', async () => {
    const unwired = file(
      'unwired.test.ts',
      `import { describe, it, test } from 'node:test';
describe('a suite', { skip: 'no audit log' }, () => { it('x', () => {}); });
test('inside', (t) => { t.skip('E2E_KUBECONFIG names another cluster'); });
test('later', { todo: 'write me' }, () => {});
test('runs', () => {});
`,
    );
    const { tests, check } = await testRun(unwired, ciEnv());
    assert.equal(tests.code, 0, 'the runner itself passes a run with skips and todos');
    assert.equal(check.code, 1, check.output);
    for (const line of [
      /^\[no-skips\] skipped: ﹣ a suite \(.*\) # no audit log$/m,
      /^\[no-skips\] skipped: ﹣ inside \(.*\) # E2E_KUBECONFIG names another cluster$/m,
      /^\[no-skips\] todo: ✔ later \(.*\) # write me$/m,
      /^\[no-skips\] runner summary: ℹ skipped 1$/m,
      /^\[no-skips\] runner summary: ℹ todo 1$/m,
    ]) {
      assert.match(check.output, line);
    }
    assert.doesNotMatch(check.output, / runs /);
  });

  it('a run where everything ran passes no-skips', async () => {
    const clean = file(
      'clean.test.ts',
      `import { describe, it } from 'node:test';
describe('all', () => { it('runs', () => {}); it('runs too (with # in its name)', () => {}); });
`,
    );
    const { tests, check } = await testRun(clean, ciEnv());
    assert.equal(tests.code, 0, tests.output);
    assert.equal(check.code, 0, check.output);
    assert.match(check.output, /no test or suite was skipped or left todo/);
  });

  it('.ci/run sets the variable for make test, fails on a skip in its output, keeps a failure code, leaves nothing in TMPDIR', async () => {
    // A stand-in `make` prints what `make test` would, so that no real suite runs here.
    const bin = join(dir, 'fake-make');
    const tmp = join(dir, 'tmp');
    mkdirSync(bin);
    mkdirSync(tmp);
    writeFileSync(
      join(bin, 'make'),
      `#!/bin/sh
echo "make $* with ${REQUIRE_ALL_TESTS_ENV}=$${REQUIRE_ALL_TESTS_ENV}"
printf '%s\\n' "$FAKE_OUTPUT"
exit "$FAKE_CODE"
`,
    );
    chmodSync(join(bin, 'make'), 0o755);
    const ciRun = (output: string, code: number) =>
      exec(join(root, '.ci', 'run'), [], {
        ...developerEnv(),
        PATH: `${bin}:${process.env.PATH ?? ''}`,
        TMPDIR: tmp,
        FAKE_OUTPUT: output,
        FAKE_CODE: String(code),
      });
    const skipped = await ciRun('﹣ real nodes (1.2ms) # not root\nℹ pass 3\nℹ skipped 0', 0);
    assert.equal(skipped.code, 1, skipped.output);
    assert.match(skipped.output, /^make test with NODEFLAVOR_REQUIRE_ALL_TESTS=1$/m);
    assert.match(skipped.output, /^\[no-skips\] skipped: ﹣ real nodes \(1\.2ms\) # not root$/m);
    const clean = await ciRun('✔ everything (1ms)\nℹ pass 1\nℹ skipped 0\nℹ todo 0', 0);
    assert.equal(clean.code, 0, clean.output);
    const failed = await ciRun('✖ something (1ms)\nℹ fail 1', 2);
    assert.equal(failed.code, 2, 'the failure of make test is the exit code');
    const both = await ciRun('﹣ x (1ms) # why', 2);
    assert.equal(both.code, 2);
    assert.match(both.output, /skipped: ﹣ x/);
    assert.deepEqual(readdirSync(tmp), [], '.ci/run removes its copy of the output');
  });

  it('the install scripts skip as non-root on a laptop, and fail in CI with the reason', async () => {
    // A stand-in `id` answering a non-root UID puts the scripts on their non-root path.
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    writeFileSync(join(bin, 'id'), '#!/bin/sh\necho 1000\n');
    chmodSync(join(bin, 'id'), 0o755);
    const PATH = `${bin}:${process.env.PATH ?? ''}`;
    const scripts = ['test/e2e/realnode/install-host-packages.sh'];
    // With chromium installed already its script has nothing to skip.
    if (!existsSync('/usr/bin/chromium')) scripts.push('test/e2e/portal/install-chromium.sh');
    for (const script of scripts) {
      const laptop = await exec('bash', [join(root, script)], developerEnv({ PATH }));
      assert.equal(laptop.code, 0, `${script}: ${laptop.output}`);
      assert.match(laptop.output, /not root: .*; skipped/, script);
      const ci = await exec(
        'bash',
        [join(root, script)],
        developerEnv({ PATH, [REQUIRE_ALL_TESTS_ENV]: '1' }),
      );
      assert.equal(ci.code, 1, `${script}: ${ci.output}`);
      assert.match(
        ci.output,
        /not root: .*NODEFLAVOR_REQUIRE_ALL_TESTS=1 \(CI\) requires every test to run/,
        script,
      );
    }
  });
});
