/**
 * The layers of src/, checked by `npm run lint:deps` (and so by `npm test`).
 *
 * LAYERS is the one place the order is written: lowest first, one entry per layer, and a layer
 * may hold several folders that stand side by side. A folder may import its own files and any
 * folder in a LOWER layer; never a folder in its own layer or above it. docs/architecture.md
 * shows the same list. A folder of src/ that is not listed here fails the check, so a new
 * capability has to be given its place.
 *
 * Nothing is tolerated: there is no list of known violations. An import that breaks the order
 * is fixed by moving the shared piece down (a type two layers share belongs to the lower one).
 */
const LAYERS = [
  ['common'], //         errors, events, the clock, channel slots
  ['config'], //         TOML loading, defaults, validation, live config
  ['logging'], //        pino, the event logger, secret scrubbing
  ['storage'], //        SQLite and PostgreSQL behind one statement API, group commit, writer lock
  ['llm'], //            ChatModel, the Anthropic client, tool loop, usage and cache breakpoints
  ['context'], //        history and summary entries, channel state, token arithmetic, the history store interface
  ['privacy'], //        who may see which channel, erasure requests, redaction of deleted text
  ['memory'], //         the memory store (full text + vectors), embedders, memory tools
  ['persona', 'attachments'], // personas; files and images
  ['compaction'], //     the Compactor, planner, summarizers, landing and splice
  ['compaction-log'], // the record of every compaction and its cost
  ['channel'], //        the channel runtime: ingest, replies' requests, message changes
  ['branch'], //         the branch tool and its agent
  ['worker'], //         background workers and their tools
  ['metrics', 'report'], // Prometheus and health; the HTML report
  ['app'], //            openApp composes every capability; the responder and the commands
  ['discord', 'export', 'migrate'], // discord.js in front of the app; `magpie export`; `magpie migrate` (every capability's schema)
  ['cli'], //            one file per command
];

const ALL_FOLDERS = LAYERS.flat();
const alternatives = (folders) => `^src/(${folders.join('|')})/`;

/** One rule per folder: what it must not import (its own layer's other folders, and every layer above). */
const layerRules = LAYERS.flatMap((layer, index) =>
  layer.map((folder) => {
    const forbidden = [...layer.filter((other) => other !== folder), ...LAYERS.slice(index + 1).flat()];
    return forbidden.length === 0
      ? undefined
      : {
          name: `layer-${folder}`,
          comment: `src/${folder}/ imports only folders in layers below it (see LAYERS in .dependency-cruiser.cjs)`,
          severity: 'error',
          from: { path: `^src/${folder}/` },
          to: { path: alternatives(forbidden) },
        };
  }),
).filter(Boolean);

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'An import cycle ties its files into one unit: move the shared piece to a file both import.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'src-not-to-test-or-bench',
      comment: 'The product never imports its tests or benchmarks.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(test|bench)/' },
    },
    {
      name: 'layer-unlisted-folder',
      comment: 'Every folder of src/ has a place in LAYERS (.dependency-cruiser.cjs); give this one its place.',
      severity: 'error',
      from: { path: '^src/', pathNot: alternatives(ALL_FOLDERS) },
      to: {},
    },
    ...layerRules,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Type-only imports are dependencies too: a changed type ripples through them.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'] },
  },
};

// The order itself, for the test that holds docs/architecture.md to it; not enumerable, so the
// configuration's schema check does not see it.
Object.defineProperty(module.exports, 'layers', { value: LAYERS, enumerable: false });
