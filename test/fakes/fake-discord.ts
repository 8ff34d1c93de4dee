/** The fake Discord lives in ./discord/; this path stays so the tests and benchmarks that import it need not change. */
export * from './discord/index.js';
