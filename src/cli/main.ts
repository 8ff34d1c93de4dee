#!/usr/bin/env node
/**
 * The `magpie` executable. Everything but process wiring lives in run-cli.ts so that the
 * dispatcher can be exercised without spawning.
 */
import { reportError, runCli } from './run-cli.js';

const io = {
  stdout: process.stdout,
  stderr: process.stderr,
  stdin: process.stdin,
  env: process.env,
  cwd: process.cwd(),
};
const code = await runCli(process.argv.slice(2), io).catch((error: unknown) => reportError('', error, io));
process.exitCode = code;
// Commands close what they open (and `run` resolves only when the command is done, e.g. after
// `start` has shut down), so the process normally ends on its own. If a library leaves a handle
// behind, do not hang forever: exit once output has had a moment to drain.
setTimeout(() => process.exit(code), 3000).unref();
