#!/usr/bin/env node
/**
 * The `magpie` executable. Everything but process wiring lives in run-cli.ts so that the
 * dispatcher can be exercised without spawning.
 */
import { ignoreClosedPipe, reportError, runCli } from './run-cli.js';

// `magpie replay --json | head` closes stdout early: the command finishes its work quietly
// (the data dir stays complete) instead of dying on an unhandled EPIPE.
ignoreClosedPipe(process.stdout);
ignoreClosedPipe(process.stderr);

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
