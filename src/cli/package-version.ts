import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The version in Magpie's package.json. The compiled file may sit at different depths (dist/,
 * a container's /app/dist/), so walk up from this file to the first package.json named magpie.
 */
export function readPackageVersion(): string {
  let directory = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = path.join(directory, 'package.json');
    if (existsSync(candidate)) {
      try {
        const manifest = JSON.parse(readFileSync(candidate, 'utf8')) as { name?: string; version?: string };
        if (manifest.name === 'magpie' && manifest.version) return manifest.version;
      } catch {
        // An unreadable manifest on the way up is not ours; keep looking.
      }
    }
    const parent = path.dirname(directory);
    if (parent === directory) return 'unknown';
    directory = parent;
  }
}
