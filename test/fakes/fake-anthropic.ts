/** The fake Anthropic lives in ./anthropic/; this path stays so the tests and benchmarks that import it need not change. */
export * from './anthropic/index.js';
