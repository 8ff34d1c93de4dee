/** Runs the real `magpie` executable in a child process, as a user or a script would. */
import { spawn, type ChildProcessByStdio, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { storageEnv } from './storage.js';

/** The compiled CLI entry point, found next to the compiled tests whatever the output dir. */
export const MAGPIE_MAIN = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));

export interface MagpieRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `magpie ARGS` to completion. `env` is the child's whole environment (callers choose how
 * much of their own to pass on); `input` is written to stdin, which is then closed.
 */
export function runMagpie(
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; input?: string },
): Promise<MagpieRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAGPIE_MAIN, ...args], {
      cwd: options.cwd,
      env: magpieEnv(args, options),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(options.input ?? '');
  });
}

/** A long-running `magpie ARGS` (start, chat): its output so far and its exit code when it ends. */
export interface MagpieChild {
  child: ChildProcessWithoutNullStreams | ChildProcessByStdio<null, Readable, Readable>;
  output: { stdout: string; stderr: string };
  exited: Promise<number | null>;
}

/** Starts `magpie ARGS` without waiting for it; `env` is the child's whole environment. */
export function startMagpie(args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }): MagpieChild {
  const child = spawn(process.execPath, [MAGPIE_MAIN, ...args], {
    cwd: options.cwd,
    env: magpieEnv(args, options),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = { stdout: '', stderr: '' };
  child.stdout.on('data', (chunk: Buffer) => (output.stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output.stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return { child, output, exited };
}

/**
 * A `magpie chat` process, a writer: resolves once it has opened its data dir (it holds the
 * writer lock from then on) and stays until its stdin ends. `args` come after `chat`.
 */
export async function startChat(args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }): Promise<ChildProcessWithoutNullStreams> {
  const child = spawn(process.execPath, [MAGPIE_MAIN, 'chat', ...args], {
    cwd: options.cwd,
    env: magpieEnv(args, options),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  await new Promise<void>((resolve, reject) => {
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      if (stderr.includes('Magpie in the terminal')) resolve();
    });
    child.on('exit', (code) => reject(new Error(`chat exited early (${code}): ${stderr}`)));
  });
  return child;
}

/** The exit code of a child started by `startChat`, once it has ended. */
export function ended(child: ChildProcessWithoutNullStreams): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.on('exit', (code) => resolve(code));
  });
}

/** The project root: the first directory above the compiled tests holding config.toml and package.json. */
export function projectRoot(): string {
  let directory = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(directory, 'config.toml')) || !existsSync(path.join(directory, 'package.json'))) {
    const parent = path.dirname(directory);
    if (parent === directory) throw new Error('project root not found');
    directory = parent;
  }
  return directory;
}

/**
 * The environment of a `magpie ARGS` child (for tests that spawn it themselves): on a PostgreSQL
 * test run, the child works in the schema of its data dir (`--data-dir`, else MAGPIE_DATA_DIR,
 * else its working directory), unless the test chose a store itself.
 */
export function magpieEnv(args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }): NodeJS.ProcessEnv {
  if (options.env.MAGPIE_STORAGE_BACKEND !== undefined) return options.env;
  const flag = args.indexOf('--data-dir');
  const dir = flag >= 0 && args[flag + 1] ? path.resolve(options.cwd, args[flag + 1]!) : options.env.MAGPIE_DATA_DIR ? path.resolve(options.cwd, options.env.MAGPIE_DATA_DIR) : options.cwd;
  return { ...options.env, ...storageEnv(dir) };
}
