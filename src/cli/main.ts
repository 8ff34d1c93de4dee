#!/usr/bin/env node
/**
 * The `magpie` executable. Everything but process wiring lives in run-cli.ts so that the
 * dispatcher can be exercised without spawning.
 */
import { runCli } from './run-cli.js';

const code = await runCli(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  stdin: process.stdin,
  env: process.env,
  cwd: process.cwd(),
});
process.exitCode = code;
// Commands close what they open, so the process normally ends on its own. If a library leaves a
// handle behind, do not hang forever: exit once output has had a moment to drain.
setTimeout(() => process.exit(code), 3000).unref();
