// A test that cannot run here (no root for real nodes, no Chromium, no audit log) is skipped with
// the reason on a developer's machine; CI (.ci/run) sets NODEFLAVOR_REQUIRE_ALL_TESTS=1, where
// every suite can run, and there such a skip is a failure that names what would have been skipped
// and why. .ci/run also reads the runner's output for any skip or todo that does not come through
// here.

export const REQUIRE_ALL_TESTS_ENV = 'NODEFLAVOR_REQUIRE_ALL_TESTS';

export function allTestsRequired(env: NodeJS.ProcessEnv = process.env): boolean {
  return env[REQUIRE_ALL_TESTS_ENV] === '1';
}

/** The error a required test raises instead of skipping. */
export function skipRefused(what: string, reason: string): Error {
  return new Error(
    `${what} would be skipped (${reason}), but ${REQUIRE_ALL_TESTS_ENV}=1 (CI) requires every test to run: make it runnable here (make tools as root installs what the suites need)`,
  );
}

/**
 * The `skip` option of a suite or test: false when it can run; else its reason, or, when every
 * test is required, a thrown error (the test file fails with that one line).
 */
export function skipUnless(
  what: string,
  reason: string | false | undefined,
  env: NodeJS.ProcessEnv = process.env,
): string | false {
  if (!reason) return false;
  if (allTestsRequired(env)) throw skipRefused(what, reason);
  return reason;
}

/** Inside a running test: skip it with the reason, or fail it when every test is required. */
export function skipTest(t: { skip(message?: string): void }, what: string, reason: string): void {
  if (allTestsRequired()) throw skipRefused(what, reason);
  t.skip(reason);
}
