import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { cruise, type ICruiseResult, type IForbiddenRuleType } from 'dependency-cruiser';
import { projectRoot } from './support/magpie-process.js';

interface LayerConfig {
  forbidden: IForbiddenRuleType[];
  options: Record<string, unknown>;
  layers: string[][];
}

const config = createRequire(import.meta.url)(path.join(projectRoot(), '.dependency-cruiser.cjs')) as LayerConfig;

/** The numbered list under "## Layers" in docs/architecture.md, each line's folders in order. */
function documentedLayers(): string[][] {
  const text = readFileSync(path.join(projectRoot(), 'docs/architecture.md'), 'utf8');
  const section = text.split(/^## /m).find((part) => part.startsWith('Layers'));
  assert.ok(section, 'docs/architecture.md has a "## Layers" section');
  return section
    .split('\n')
    .filter((line) => /^\d+\. `/.test(line))
    .map((line) => [...line.replace(/ — .*$/, '').matchAll(/`([a-z-]+)\/`/g)].map((match) => match[1]!));
}

test('docs/architecture.md lists the layers in the order .dependency-cruiser.cjs checks', () => {
  assert.ok(config.layers.length > 10, 'the config exposes its LAYERS');
  assert.deepEqual(documentedLayers(), config.layers);
});

test('the layer rules refuse an upward import, a sibling import, a cycle, a test import and an unlisted folder, and allow a downward import', async () => {
  const root = mkdtempSync(path.join(tmpdir(), 'magpie-layers-'));
  try {
    const files: Record<string, string> = {
      'src/common/low.ts': "import type { Top } from '../cli/top.js';\nexport type Low = Top;\n",
      'src/cli/top.ts': "import type { Clean } from '../common/clean.js';\nexport type Top = Clean;\n",
      'src/common/clean.ts': 'export type Clean = string;\n',
      'src/persona/beside.ts': "import type { Note } from '../attachments/note.js';\nexport type Beside = Note;\n",
      'src/attachments/note.ts': 'export type Note = number;\n',
      'src/report/first.ts': "import type { Second } from './second.js';\nexport type First = Second | 1;\n",
      'src/report/second.ts': "import type { First } from './first.js';\nexport type Second = First | 2;\n",
      'src/config/helped.ts': "import type { Helper } from '../../test/helper.js';\nexport type Helped = Helper;\n",
      'src/unlisted/stray.ts': "import type { Clean } from '../common/clean.js';\nexport type Stray = Clean;\n",
      'test/helper.ts': 'export type Helper = boolean;\n',
      'tsconfig.json': JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true } }),
    };
    for (const [name, text] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
      writeFileSync(path.join(root, name), text);
    }
    const result = await cruise(
      ['src'],
      {
        baseDir: root,
        validate: true,
        ruleSet: { forbidden: config.forbidden },
        tsPreCompilationDeps: true,
        tsConfig: { fileName: path.join(root, 'tsconfig.json') },
      },
      {},
      { tsConfig: { options: { module: 'NodeNext', moduleResolution: 'NodeNext' } } },
    );
    const cruised = result.output as ICruiseResult;
    const found = cruised.summary.violations.map((violation) => `${violation.rule.name}: ${violation.from} → ${violation.to}`).sort();
    assert.deepEqual(found, [
      'layer-common: src/common/low.ts → src/cli/top.ts',
      'layer-persona: src/persona/beside.ts → src/attachments/note.ts',
      'layer-unlisted-folder: src/unlisted/stray.ts → src/common/clean.ts',
      'no-circular: src/report/first.ts → src/report/second.ts',
      'src-not-to-test-or-bench: src/config/helped.ts → test/helper.ts',
    ]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
