#!/usr/bin/env node
/**
 * Moves the files that keep the layers of docs/architecture.md (the context layer under
 * channel/ and compaction/, replay with the CLI, the privacy propagator up to channel/, the
 * lock interface down to storage/) and rewrites every relative import that points at a moved
 * file, across src/, test/, bench/ and scripts/, including the moved files' own imports.
 *
 * Re-runnable: a move already done is left alone, a move whose source is gone is skipped with
 * a note, and a second run changes nothing. Run from the repository root:
 *
 *   node scripts/apply-layer-moves.mjs
 *
 * Whole files only. These edits move code between files and are made by hand, on the files'
 * old paths, before this script runs (a merge that loses one must redo it; each is small):
 *   - channel/calibration.ts: the table (CALIBRATION_MIGRATIONS, CalibrationStore) went to
 *     channel/calibration-store.ts (clampFactor is exported for it); the arithmetic stays, and
 *     this script moves it to context/. Importers of the table: app/migrations.ts,
 *     channel/calibration-keeper.ts, test/support/store-contract.ts.
 *   - channel/model-request.ts: SUMMARY_HEADER, SUMMARY_HEADER_TOKENS, renderSummary and
 *     estimateSummaryTokens went to context/summary-text.ts (channel/index.ts re-exports
 *     renderSummary from there).
 *   - channel/history-store.ts: ChannelLocation, LoadedChannel, NewSummary, SpliceChange went to
 *     context/history-store.ts (history-store.ts re-exports them) with the new interface
 *     SummaryWrites (splice, truncate, extendMarker), which HistoryStore implements; the five
 *     compaction files that took `store: HistoryStore` take `store: SummaryWrites`.
 *   - attachments/summary-note.ts: withAttachmentNote went to compaction/attachment-note.ts.
 *   - memory/types.ts: ChannelView, ViewLookup, ViewRegistry are defined in
 *     privacy/channel-views.ts and re-exported by memory/types.ts (privacy sits below memory).
 *   - compaction-log/: MODEL_USAGE_KIND and LogRow went to compaction-log/log-row.ts.
 *   - channel/runtime.ts no longer builds PgChannelLocks: ChannelRuntimeOptions has
 *     `locks?: ChannelLocks`, which app/open-app.ts and cli/commands/replay.ts fill from
 *     app/compaction-locks.ts (PostgreSQL only); test/postgres-locks.test.ts passes it.
 *   - channel/channel-dialect.ts holds what channel/catch-up-points.ts, channel/history-store.ts
 *     and worker/channel-history-tool.ts spelled with isPostgres(db).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/** [from, to], paths from the repository root. */
const MOVES = [
  ['src/channel/types.ts', 'src/context/types.ts'],
  ['src/channel/token-estimate.ts', 'src/context/token-estimate.ts'],
  ['src/attachments/image-tokens.ts', 'src/context/image-tokens.ts'],
  ['src/channel/request-room.ts', 'src/context/request-room.ts'],
  ['src/channel/channel-state.ts', 'src/context/channel-state.ts'],
  ['src/channel/calibration.ts', 'src/context/calibration.ts'],
  ['src/compaction/replay.ts', 'src/cli/replay-lines.ts'],
  ['src/privacy/propagator.ts', 'src/channel/privacy-propagator.ts'],
  ['src/privacy/summary-rewrites.ts', 'src/channel/summary-rewrites.ts'],
  ['src/compaction/channel-locks.ts', 'src/storage/channel-locks.ts'],
];

const ROOTS = ['src', 'test', 'bench', 'scripts'];
const SOURCE = /\.(ts|mts|mjs|js)$/;
const root = process.cwd();

if (!existsSync(path.join(root, 'src')) || !existsSync(path.join(root, 'package.json'))) {
  console.error('apply-layer-moves: run this from the repository root (no src/ or package.json here)');
  process.exit(1);
}

/** New path of each moved file, by old path (absolute). */
const renamed = new Map(MOVES.map(([from, to]) => [path.resolve(root, from), path.resolve(root, to)]));
/** Old path of each file moved in this run, by new path: its imports are relative to the old. */
const movedNow = new Map();

for (const [from, to] of MOVES) {
  const source = path.resolve(root, from);
  const target = path.resolve(root, to);
  if (existsSync(target) && !existsSync(source)) continue;
  if (!existsSync(source)) {
    console.log(`skip ${from} → ${to}: ${from} does not exist`);
    continue;
  }
  if (existsSync(target)) {
    console.log(`skip ${from} → ${to}: both exist; merge them by hand`);
    continue;
  }
  console.log(`move ${from} → ${to}`);
  mkdirSync(path.dirname(target), { recursive: true });
  execFileSync('git', ['mv', from, to], { cwd: root, stdio: 'inherit' });
  movedNow.set(target, source);
}

let changedFiles = 0;
for (const file of ROOTS.flatMap((dir) => listSources(path.resolve(root, dir)))) {
  const writtenAt = movedNow.get(file) ?? file;
  const text = readFileSync(file, 'utf8');
  const rewritten = rewriteImports(text, writtenAt, file);
  if (rewritten !== text) {
    changedFiles += 1;
    console.log(`imports ${path.relative(root, file)}`);
    writeFileSync(file, rewritten);
  }
}
console.log(`${movedNow.size} moved, ${changedFiles} files' imports rewritten`);

function listSources(dir) {
  if (!existsSync(dir)) return [];
  const out = [];
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name.startsWith('.')) continue;
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...listSources(full));
    else if (SOURCE.test(name) && !name.endsWith('.d.ts')) out.push(full);
  }
  return out;
}

/**
 * Every relative specifier (static import, export-from, dynamic import) that resolves to a
 * moved file, or that a moved file wrote relative to its old folder, is written anew relative
 * to `currentPath`. Specifiers keep their extension (`.js`).
 */
function rewriteImports(text, writtenAt, currentPath) {
  const { importedFiles } = ts.preProcessFile(text, true, true);
  const edits = [];
  for (const ref of importedFiles) {
    const spec = ref.fileName;
    if (!spec.startsWith('./') && !spec.startsWith('../')) continue;
    const resolved = path.resolve(path.dirname(writtenAt), spec);
    const moved = renamed.get(resolved.replace(/\.js$/, '.ts'));
    // Untouched unless the target moved or this file did: no churn in anyone's spelling.
    if (!moved && writtenAt === currentPath) continue;
    const target = moved ? moved.replace(/\.ts$/, path.extname(resolved)) : resolved;
    const next = specifierFor(currentPath, target);
    if (next !== spec) edits.push({ spec, next, pos: ref.pos });
  }
  let out = text;
  // preProcessFile's position is that of the opening quote; the specifier follows it.
  for (const edit of edits.sort((a, b) => b.pos - a.pos)) {
    const start = edit.pos + 1;
    const end = start + edit.spec.length;
    if (out.slice(start, end) !== edit.spec) throw new Error(`unexpected text at ${currentPath}:${start}`);
    out = out.slice(0, start) + edit.next + out.slice(end);
  }
  return out;
}

/** A relative specifier from `fromFile` to `target`, always starting with `./` or `../`. */
function specifierFor(fromFile, target) {
  const rel = path.relative(path.dirname(fromFile), target).split(path.sep).join('/');
  return rel.startsWith('.') ? rel : `./${rel}`;
}
