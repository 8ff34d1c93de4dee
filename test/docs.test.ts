/** The documentation stays true: every config key has its entry, every link leads somewhere. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { CONFIG_SPEC, type TableSpec } from '../src/config/schema.js';
import { projectRoot } from './support/magpie-process.js';

const root = projectRoot();

/** Every leaf key of the schema, grouped by the TOML table it lives in (`defaults.compaction`). */
function keysByTable(spec: TableSpec, prefix = ''): Map<string, string[]> {
  const tables = new Map<string, string[]>();
  for (const [key, field] of Object.entries(spec)) {
    if (field.kind === 'table') {
      for (const [table, keys] of keysByTable(field.fields, prefix === '' ? key : `${prefix}.${key}`)) tables.set(table, keys);
    } else {
      tables.set(prefix, [...(tables.get(prefix) ?? []), key]);
    }
  }
  return tables;
}

/** The text under each heading that names a TOML table in backticks, e.g. ### `[memory.http]`. */
function sectionsByTable(markdown: string): Map<string, string> {
  const sections = new Map<string, string>();
  const parts = markdown.split(/^(?=#{2,4} )/m);
  for (const part of parts) {
    const heading = /^#{2,4} .*?`\[([a-z_.]+)\]`/.exec(part);
    if (heading) sections.set(heading[1]!, part);
  }
  return sections;
}

test('docs/configuration.md documents every key of the config schema under its table', () => {
  const reference = readFileSync(path.join(root, 'docs', 'configuration.md'), 'utf8');
  const sections = sectionsByTable(reference);
  const missing: string[] = [];
  for (const [table, keys] of keysByTable(CONFIG_SPEC)) {
    const section = sections.get(table);
    if (!section) {
      missing.push(`[${table}] (no section headed \`[${table}]\`)`);
      continue;
    }
    for (const key of keys) {
      if (!new RegExp(`^\\|\\s*\`${key}\`\\s*\\|`, 'm').test(section)) missing.push(`${table}.${key}`);
    }
  }
  assert.deepEqual(missing, [], `keys without a row in docs/configuration.md: ${missing.join(', ')}`);
});

/** README.md and every page under docs/ (the folder of pages still to be placed aside). */
function documentationFiles(): string[] {
  const pages = readdirSync(path.join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => path.join(root, 'docs', name));
  return [path.join(root, 'README.md'), ...pages];
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  for (const line of withoutCode(markdown).split('\n')) {
    const heading = /^#{1,6} (.*)$/.exec(line);
    if (heading) anchors.add(slug(heading[1]!));
  }
  return anchors;
}

/** Fenced blocks hold shell and TOML, not links. */
function withoutCode(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '');
}

test('every link in the README and docs/ resolves: files exist, anchors name a heading', () => {
  const broken: string[] = [];
  let checked = 0;
  for (const file of documentationFiles()) {
    const text = withoutCode(readFileSync(file, 'utf8'));
    for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = match[1]!;
      if (/^(https?|mailto):/.test(target)) continue;
      checked += 1;
      const [filePart, anchor] = target.split('#') as [string, string | undefined];
      const resolved = filePart === '' ? file : path.resolve(path.dirname(file), filePart);
      const where = `${path.relative(root, file)}: ${target}`;
      if (!existsSync(resolved)) {
        broken.push(`${where} (no such file)`);
        continue;
      }
      if (anchor !== undefined && resolved.endsWith('.md') && !anchorsOf(readFileSync(resolved, 'utf8')).has(anchor)) {
        broken.push(`${where} (no such heading)`);
      }
    }
  }
  assert.ok(checked > 20, `links were found (${checked})`);
  assert.deepEqual(broken, []);
});

test('the README fits on a screen: at most 100 lines (the reference lives in docs/)', () => {
  const lines = readFileSync(path.join(root, 'README.md'), 'utf8').split('\n').length;
  assert.ok(lines <= 100, `README.md has ${lines} lines`);
});
