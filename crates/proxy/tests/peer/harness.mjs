// What the peer scripts (drive.mjs, drive-fixture.mjs, drive-passthrough.mjs, fixture-check.mjs)
// share: the expectation a case throws, how a failure is described, and the tally that prints
// "ok NAME" or "FAIL NAME: why" per case, then "N passed, N failed", and exits 1 if any failed.
import { readFileSync, rmSync } from "node:fs";

/// An unmet expectation of a case (as opposed to a fault of the script).
export class Expectation extends Error {}

/// Throws an [Expectation] saying `why` unless `condition` holds.
export function expect(condition, why) {
  if (!condition) throw new Expectation(why);
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/// The command line `argv` read onto a copy of `defaults`: each `--flag VALUE` named in `valued`
/// sets the key it maps to, each bare `--flag` named in `switches` sets its key to true; any other
/// argument is passed to `usage` (which exits).
export function parseArgs(argv, defaults, { valued = {}, switches = {} }, usage) {
  const o = { ...defaults };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    if (flag in valued) o[valued[flag]] = argv[++i];
    else if (flag in switches) o[switches[flag]] = true;
    else usage(`unknown argument ${flag}`);
  }
  return o;
}

/// The text blocks of a tool result, one per line.
export const textOf = (result) =>
  (result.content ?? [])
    .filter((b) => b.type === "text")
    .map((b) => b.text)
    .join("\n");

/// An unmet expectation or a protocol failure says what went wrong; a fault of this script
/// shows where.
export function describe(error) {
  if (error instanceof Expectation) return error.message;
  if (error instanceof TypeError || error instanceof ReferenceError || error instanceof SyntaxError) return error.stack;
  return `${error?.name ?? "Error"}: ${error?.message ?? error}`;
}

/// The last `lines` lines of a stderr log, indented for the report under a failed case.
export function tail(file, lines = 20) {
  let text;
  try {
    text = readFileSync(file, "utf8").trimEnd();
  } catch {
    return "    | (no stderr log)";
  }
  return (text ? text.split("\n").slice(-lines) : ["(empty)"]).map((line) => `    | ${line}`).join("\n");
}

/// Counts the cases that passed and failed and prints one line for each.
export class Tally {
  passed = 0;
  failed = 0;

  /// Runs `body()`: "ok NAME" when it returns, "FAIL NAME: why" when it throws (`why`:
  /// `explain(error)`). `suffix()` is added to either line. Whether it passed.
  async check(name, body, { explain = describe, suffix = () => "" } = {}) {
    try {
      await body();
      this.passed += 1;
      console.log(`ok ${name}${suffix(true)}`);
      return true;
    } catch (error) {
      this.failed += 1;
      console.log(`FAIL ${name}: ${explain(error)}${suffix(false)}`);
      return false;
    }
  }

  /// Prints "N passed, N failed" and exits: 0 when none failed, 1 otherwise.
  finish() {
    console.log(`${this.passed} passed, ${this.failed} failed`);
    process.exit(this.failed === 0 ? 0 : 1);
  }
}

/// Runs each named case as `run(name, opened, note)` and exits with the tally. A case pushes the
/// sessions it opens onto `opened` (each with `dir`, `stderrLog` and `close()`; closed and
/// removed after the case) and may `note(line)` what it observed ("  observed: line" under its
/// result). `asked(opened)` is the number of the guard's questions, shown as "(elicitations: N)";
/// `okNote` is added to it on a passed case. A failed case also shows each session's stderr tail.
export async function runCases(names, run, { asked, okNote = "" }) {
  const tally = new Tally();
  for (const name of names) {
    const opened = [];
    const notes = [];
    const suffix = (passed) => ` (elicitations: ${asked(opened)}${passed ? okNote : ""})`;
    const passed = await tally.check(name, () => run(name, opened, (line) => notes.push(line)), { suffix });
    for (const line of notes) console.log(`  observed: ${line}`);
    if (!passed) {
      for (const s of opened) console.log(`  stderr of the proxy and upstream, last lines:\n${tail(s.stderrLog)}`);
    }
    for (const s of opened) {
      await s.close();
      rmSync(s.dir, { recursive: true, force: true });
    }
  }
  tally.finish();
}
