/**
 * Skipped suites that say why: a suite that cannot run here (no PostgreSQL, no
 * credentials for a real service) prints one `SKIPPED` line on stderr when the
 * file is collected and carries the reason in its title, so a test run states
 * what it did not test and why instead of only counting skips.
 */
import { basename } from "node:path";
import { describe } from "vitest";

/**
 * Prints `file: SKIPPED title: reason` on stderr (console.warn, which vitest
 * shows with the file's output) and returns the reason.
 */
export function skipNotice(file: string, title: string, reason: string): string {
  console.warn(`${basename(file)}: SKIPPED ${title}: ${reason}`);
  return reason;
}

/**
 * `describe(title, fn)` when `reason` is undefined; otherwise a skipped suite
 * titled `title — SKIPPED: reason`, announced with {@link skipNotice}.
 * @param file the calling test file (`import.meta.url` or a path), named in the notice.
 */
export function describeUnless(
  file: string,
  reason: string | undefined,
  title: string,
  fn: () => void,
): void {
  if (reason === undefined) {
    describe(title, fn);
    return;
  }
  skipNotice(file, title, reason);
  describe.skip(`${title} — SKIPPED: ${reason}`, fn);
}
