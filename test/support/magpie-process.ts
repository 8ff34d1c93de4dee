/** Runs the real `magpie` executable in a child process, as a user or a script would. */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

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
      env: options.env,
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
